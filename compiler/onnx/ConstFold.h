// Compile-time evaluation on Const tensors: what shape arithmetic and constant masks need.
// Each mirrors the ONNX op of the same name on known values.
#pragma once
#include <functional>

#include "compiler/onnx/OnnxModel.h"

namespace mt::onnximport {

// Numpy broadcast of two shapes; throws ImportError (malformed) naming `what` if they do not.
std::vector<int64_t> broadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                    const std::string& what);

// Elementwise over broadcast operands; the result has `kind`.
Const foldElementwise(const std::vector<const Const*>& operands, Const::Kind kind,
                      const std::function<double(const double*)>& f, const std::string& what);

Const foldTranspose(const Const& x, const std::vector<int64_t>& perm);
Const foldGather(const Const& data, const Const& indices, int64_t axis, const std::string& what);
Const foldConcat(const std::vector<const Const*>& parts, int64_t axis);
// starts/steps per dimension, sizes = the result's shape (already normalised and in range).
Const foldSlice(const Const& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& steps,
                const std::vector<int64_t>& sizes);
Const foldExpand(const Const& x, const std::vector<int64_t>& shape);
Const foldTrilu(const Const& x, bool upper, int64_t k);

}  // namespace mt::onnximport
