// Reading ONNX files for the importer: the model proto, tensors (inline or external data),
// and the compile-time constants the importer folds shape arithmetic with.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"

namespace mt::onnximport {

// An import failure. `unsupported`: the model is well-formed but uses something the importer
// does not handle (an op, a dtype, an attribute value); otherwise the file is malformed. An
// mt::Error, so one that escapes its importer still ends the tool with its message.
struct ImportError : Error {
  ImportError(bool unsupported, const std::string& message) : Error(message), unsupported(unsupported) {}
  bool unsupported;
};
[[noreturn]] void unsupported(const std::string& message);
[[noreturn]] void malformed(const std::string& message);

// A tensor known at compile time. Values are held as doubles (exact for every int64 a shape
// holds and for every float); `kind` says what they are.
struct Const {
  enum class Kind { Float, Int, Bool };
  Kind kind = Kind::Float;
  std::vector<int64_t> shape;
  std::vector<double> values;
  // The FLOAT initializers this value was computed from (by folding): if it ends up used as
  // run-time data of a model to train, those initializers are parameters, not constants.
  std::set<std::string> sources;

  int64_t numel() const;
  bool isScalarLike() const { return numel() == 1; }
  // All elements equal (and at least one).
  bool isUniform() const;
  std::vector<int64_t> ints() const;  // the values as integers (saturating at the int64 range)
};

// Elements of `shape`; fails (malformed, naming `what`) on a negative dimension or more than
// 2^48 elements, without overflowing.
int64_t checkedNumel(const std::vector<int64_t>& shape, const std::string& what);
bool withinElementLimit(const std::vector<int64_t>& shape);  // the same test, without throwing
// The same, for a tensor the importer computes at compile time: at most 2^26 elements.
int64_t checkedFoldNumel(const std::vector<int64_t>& shape, const std::string& what);

// The ONNX element types the importer runs: FLOAT, DOUBLE (narrowed to FLOAT: MegaTrain
// computes in fp32), INT64 and INT32 (as 32-bit integers) and BOOL.
bool isSupportedElemType(int32_t elem_type);
inline constexpr char kSupportedElemTypes[] = "FLOAT, DOUBLE (run as FLOAT), INT64, INT32, BOOL";
// The element type a supported type runs as: DOUBLE becomes FLOAT, the rest stay.
int32_t narrowedElemType(int32_t elem_type);
std::string elemTypeName(int32_t elem_type);
Const::Kind constKindOf(int32_t elem_type);

// Reads and parses `path`; throws ImportError (malformed) naming the problem.
onnx::ModelProto readModel(const std::string& path);

// The directory of the model file at `path`: where its external data lies.
std::string directoryOf(const std::string& path);

// The bytes of a tensor kept as external data, in place in the mapped file beside the model
// (`model_dir`), checked to lie inside it. Throws ImportError.
struct ExternalBytes {
  std::unique_ptr<MappedFile> file;
  const char* data = nullptr;
  size_t size = 0;
};
ExternalBytes externalBytes(const onnx::TensorProto& tensor, const std::string& model_dir);

// The tensor's values; external data is read relative to `model_dir` with bounds checks.
Const decodeTensor(const onnx::TensorProto& tensor, const std::string& model_dir);

// Whether a FLOAT tensor holds Inf or NaN, read in place (nothing allocated); false for another
// type or data that does not match its shape (decodeTensor refuses those when they are read).
bool holdsNonFinite(const onnx::TensorProto& tensor, const std::string& model_dir);

// The opset version of the default ONNX domain, or -1 if the model imports none.
int64_t defaultOpset(const onnx::ModelProto& model);

}  // namespace mt::onnximport
