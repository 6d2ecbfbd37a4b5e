#include "passes/ParamPieces.h"

#include "compiler/dialect/MtAttrNames.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace mt {

SmallVector<int64_t> pieceStarts(int64_t rows, int64_t pieces) {
  SmallVector<int64_t> first;
  for (int64_t c = 0; c <= pieces; ++c) first.push_back(rows * c / pieces);
  return first;
}

SmallVector<BlockArgument> insertPieces(func::FuncOp func, BlockArgument weight, ArrayRef<int64_t> first) {
  Builder b(func.getContext());
  auto type = cast<RankedTensorType>(weight.getType());
  auto param = func.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kParamAttr);
  SmallVector<BlockArgument> pieces;
  for (size_t c = 0; c + 1 < first.size(); ++c) {
    NamedAttrList attrs(param);
    attrs.set(kParamRowsKey, b.getDenseI64ArrayAttr({first[c], type.getDimSize(0)}));
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = first[c + 1] - first[c];
    const unsigned index = weight.getArgNumber() + 1 + c;
    func.insertArgument(index, RankedTensorType::get(shape, type.getElementType()),
                        b.getDictionaryAttr({b.getNamedAttr(kParamAttr, attrs.getDictionary(func.getContext()))}),
                        weight.getLoc());
    pieces.push_back(func.getArgument(index));
  }
  return pieces;
}

void splitGradResult(func::FuncOp func, StringRef name, ArrayRef<Value> pieceGrads, ArrayRef<int64_t> first) {
  Builder b(func.getContext());
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  SmallVector<Value> results;
  SmallVector<Attribute> attrs;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    auto grad = func.getResultAttrOfType<StringAttr>(i, kGradAttr);
    if (!grad || grad.getValue() != name) {
      results.push_back(ret.getOperand(i));
      attrs.push_back(resultAttrs[i] ? Attribute(resultAttrs[i]) : b.getDictionaryAttr({}));
      continue;
    }
    for (size_t c = 0; c < pieceGrads.size(); ++c) {
      results.push_back(pieceGrads[c]);
      attrs.push_back(b.getDictionaryAttr({b.getNamedAttr(kGradAttr, b.getStringAttr(name)),
                                           b.getNamedAttr(kGradRowAttr, b.getI64IntegerAttr(first[c]))}));
    }
  }
  ret->setOperands(results);
  SmallVector<Type> types;
  for (Value v : results) types.push_back(v.getType());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
  func.setAllResultAttrs(attrs);
}

void noteSplit(func::FuncOp func, StringRef listAttr, StringRef name) {
  Builder b(func.getContext());
  SmallVector<Attribute> names;
  if (auto split = func->getAttrOfType<ArrayAttr>(listAttr)) names.append(split.begin(), split.end());
  names.push_back(b.getStringAttr(name));
  func->setAttr(listAttr, b.getArrayAttr(names));
}

}  // namespace mt
