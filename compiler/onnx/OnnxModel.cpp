#include "compiler/onnx/OnnxModel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"

namespace mt::onnximport {

void unsupported(const std::string& message) { throw ImportError(true, message); }
void malformed(const std::string& message) { throw ImportError(false, message); }

int64_t Const::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
constexpr int64_t kMaxElements = int64_t{1} << 48;
}  // namespace

bool withinElementLimit(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxElements || (d && n > kMaxElements / d)) return false;
    n *= d;
  }
  return true;
}

int64_t checkedNumel(const std::vector<int64_t>& shape, const std::string& what) {
  if (!withinElementLimit(shape)) {
    for (int64_t d : shape)
      if (d < 0) malformed(what + ": negative dimension " + std::to_string(d));
    malformed(what + ": a tensor of more than 2^48 elements");
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t checkedFoldNumel(const std::vector<int64_t>& shape, const std::string& what) {
  const int64_t n = checkedNumel(shape, what);
  if (n > (int64_t{1} << 26))
    unsupported(what + ": a constant of " + std::to_string(n) + " elements is too large to compute while compiling");
  return n;
}

bool Const::isUniform() const {
  if (values.empty()) return false;
  for (double v : values)
    if (v != values[0]) return false;
  return true;
}

std::vector<int64_t> Const::ints() const {
  std::vector<int64_t> out;
  out.reserve(values.size());
  // Saturating: exporters write INT64_MAX for "to the end", which a double rounds up to 2^63.
  constexpr double kLimit = 9.2233720368547758e18;
  for (double v : values)
    out.push_back(std::isnan(v) ? 0
                  : v >= kLimit ? std::numeric_limits<int64_t>::max()
                  : v <= -kLimit ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(v));
  return out;
}

bool isSupportedElemType(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE || t == onnx::TensorProto::INT64 ||
         t == onnx::TensorProto::INT32 || t == onnx::TensorProto::BOOL;
}

int32_t narrowedElemType(int32_t t) { return t == onnx::TensorProto::DOUBLE ? onnx::TensorProto::FLOAT : t; }

std::string elemTypeName(int32_t t) {
  if (!onnx::TensorProto::DataType_IsValid(t)) return "an unknown type";
  return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t));
}

Const::Kind constKindOf(int32_t t) {
  if (t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE) return Const::Kind::Float;
  if (t == onnx::TensorProto::BOOL) return Const::Kind::Bool;
  return Const::Kind::Int;
}

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

onnx::ModelProto readModel(const std::string& path) {
  std::optional<InputFile> file;
  try {
    file.emplace(path, "model", "");
  } catch (const Error& e) {
    malformed(e.what());
  }
  google::protobuf::io::FileInputStream raw(file->fd());
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());  // models up to the 2 GB protobuf limit
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    malformed(path + " is not an ONNX model (protobuf parse failed)");
  if (!model.has_graph()) malformed(path + " has no graph");
  return model;
}

int64_t defaultOpset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return -1;
}

namespace {

// Elements of a fixed-width little-endian type from raw bytes.
template <typename T>
void fromRaw(const char* bytes, size_t size, int64_t n, std::vector<double>& out, const std::string& name) {
  if (size != static_cast<size_t>(n) * sizeof(T))
    malformed("tensor '" + name + "' holds " + std::to_string(size) + " bytes for " + std::to_string(n) +
              " elements of " + std::to_string(sizeof(T)) + " bytes");
  out.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

template <typename Field>
void fromField(const Field& field, int64_t n, std::vector<double>& out, const std::string& name) {
  if (field.size() != n)
    malformed("tensor '" + name + "' has " + std::to_string(field.size()) + " values for " + std::to_string(n) +
              " elements");
  out.assign(field.begin(), field.end());
}

// `location` inside `model_dir` with every symlink resolved, refused unless it still lies inside
// the folder: a link pointing elsewhere would read any file into the weights (cf. CVE-2024-27318).
std::string confinedPath(const std::string& model_dir, const std::string& location, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path dir = fs::canonical(model_dir, error);
  if (error) malformed("cannot resolve the model's folder " + model_dir + ": " + error.message());
  const fs::path file = fs::canonical(dir / location, error);
  if (error)
    malformed("cannot open the external data of tensor '" + name + "' (" + location + " beside the model): " +
              error.message());
  if (std::mismatch(dir.begin(), dir.end(), file.begin(), file.end()).first != dir.end())
    malformed("the external data of tensor '" + name + "' (" + location + ") resolves to " + file.string() +
              ", outside the model's folder " + dir.string() + ": a symlink out of the folder is refused; copy "
              "the file in instead");
  return file.string();
}

}  // namespace

ExternalBytes externalBytes(const onnx::TensorProto& t, const std::string& model_dir) {
  const std::string& name = t.name();
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (...) {
      malformed("tensor '" + name + "' has a non-numeric external-data " + kv.key());
    }
  }
  if (location.empty() || location.find("..") != std::string::npos || location[0] == '/')
    malformed("tensor '" + name + "' has a bad external-data location '" + location + "'");
  ExternalBytes bytes;
  try {
    bytes.file = std::make_unique<MappedFile>(confinedPath(model_dir, location, name),
                                              "the external data of tensor '" + name + "'",
                                              "(external-data files lie beside the model)");
  } catch (const Error& e) {
    malformed(e.what());
  }
  const int64_t size = static_cast<int64_t>(bytes.file->size());
  if (length < 0) length = size - offset;
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    malformed("tensor '" + name + "' reads outside its external-data file " + location);
  bytes.data = reinterpret_cast<const char*>(bytes.file->data()) + offset;
  bytes.size = static_cast<size_t>(length);
  return bytes;
}

bool holdsNonFinite(const onnx::TensorProto& t, const std::string& model_dir) {
  if (t.data_type() != onnx::TensorProto::FLOAT) return false;
  if (t.data_location() != onnx::TensorProto::EXTERNAL && !t.has_raw_data()) {
    for (float x : t.float_data())
      if (!std::isfinite(x)) return true;
    return false;
  }
  ExternalBytes external;
  const char* raw = t.raw_data().data();
  size_t size = t.raw_data().size();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    external = externalBytes(t, model_dir);
    raw = external.data;
    size = external.size;
  }
  for (size_t i = 0; i + 4 <= size; i += 4) {
    float x;
    std::memcpy(&x, raw + i, 4);
    if (!std::isfinite(x)) return true;
  }
  return false;
}

Const decodeTensor(const onnx::TensorProto& t, const std::string& model_dir) {
  const std::string name = t.name().empty() ? "(unnamed)" : t.name();
  Const c;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t{1} << 40) || (d && n > (int64_t{1} << 40) / d))
      malformed("tensor '" + name + "' has a bad shape");
    n *= d;
    c.shape.push_back(d);
  }
  const int32_t type = t.data_type();
  if (!isSupportedElemType(type))
    unsupported("tensor '" + name + "' has element type " + elemTypeName(type) + " (supported: " +
                kSupportedElemTypes + ")");
  c.kind = constKindOf(type);

  // Raw bytes: inline, or read in place from the mapped external-data file.
  bool has_raw = t.has_raw_data();
  const char* raw = t.raw_data().data();
  size_t raw_size = t.raw_data().size();
  ExternalBytes external;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    external = externalBytes(t, model_dir);
    raw = external.data;
    raw_size = external.size;
    has_raw = true;
  }
  if (has_raw) {
    switch (type) {
      case onnx::TensorProto::FLOAT: fromRaw<float>(raw, raw_size, n, c.values, name); break;
      case onnx::TensorProto::DOUBLE: fromRaw<double>(raw, raw_size, n, c.values, name); break;
      case onnx::TensorProto::INT64: fromRaw<int64_t>(raw, raw_size, n, c.values, name); break;
      case onnx::TensorProto::INT32: fromRaw<int32_t>(raw, raw_size, n, c.values, name); break;
      case onnx::TensorProto::BOOL: fromRaw<uint8_t>(raw, raw_size, n, c.values, name); break;
    }
  } else {
    switch (type) {
      case onnx::TensorProto::FLOAT: fromField(t.float_data(), n, c.values, name); break;
      case onnx::TensorProto::DOUBLE: fromField(t.double_data(), n, c.values, name); break;
      case onnx::TensorProto::INT64: fromField(t.int64_data(), n, c.values, name); break;
      default: fromField(t.int32_data(), n, c.values, name); break;  // INT32, BOOL
    }
  }
  return c;
}

}  // namespace mt::onnximport
