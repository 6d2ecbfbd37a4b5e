#include "compiler/onnx/OnnxWriteBack.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "compiler/onnx/OnnxModel.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"

namespace mt::onnximport {
namespace {

// "name" or "name (transposed)" -> (name, transposed)
std::pair<std::string, bool> parseOrigin(std::string origin) {
  const std::string suffix = " (transposed)";
  const bool transposed = origin.size() > suffix.size() && origin.compare(origin.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (transposed) origin.resize(origin.size() - suffix.size());
  return {origin, transposed};
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(sep, start)) != std::string::npos; start = at + 1) parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

// Where tensor bytes go: inline (raw_data) or, for models that use external data or would pass
// protobuf's 2 GB, into one data file beside the output, each tensor at a 64-byte aligned offset.
class TensorBytes {
 public:
  TensorBytes(const std::string& output, bool external) {
    if (!external) return;
    const size_t slash = output.rfind('/');
    location_ = (slash == std::string::npos ? output : output.substr(slash + 1)) + ".data";
    data_.emplace(output + ".data");
  }
  bool external() const { return data_.has_value(); }
  const std::string& location() const { return location_; }
  int64_t size() const { return offset_; }

  void place(onnx::TensorProto& t, const char* bytes, size_t size) {
    t.clear_float_data();
    t.clear_double_data();
    t.clear_external_data();
    if (!data_) {
      t.set_data_location(onnx::TensorProto::DEFAULT);
      t.set_raw_data(bytes, size);
      return;
    }
    static const char zeros[64] = {};
    const int64_t pad = (64 - offset_ % 64) % 64;
    data_->write(zeros, static_cast<size_t>(pad));
    offset_ += pad;
    data_->write(bytes, size);
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] : {std::pair<std::string, std::string>{"location", location_},
                              {"offset", std::to_string(offset_)}, {"length", std::to_string(size)}}) {
      auto* entry = t.add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    }
    offset_ += static_cast<int64_t>(size);
  }
  void commit() {
    if (data_) data_->commit();
  }

 private:
  std::optional<AtomicFileWriter> data_;
  std::string location_;
  int64_t offset_ = 0;
};

// Writes `values` (f32, shape `shape`, transposed first if asked) into `t` as raw FLOAT data.
void setValues(onnx::TensorProto& t, const SafetensorsEntry& e, bool transposed, const std::string& what,
               TensorBytes& out) {
  std::vector<int64_t> shape = e.shape;
  if (transposed) {
    if (shape.size() != 2) throw Error(what + ": a transposed origin needs a 2-D tensor");
    std::swap(shape[0], shape[1]);
  }
  if (!std::equal(shape.begin(), shape.end(), t.dims().begin(), t.dims().end()))
    throw Error(what + ": the trained tensor's shape does not match the model's");
  const float* src = reinterpret_cast<const float*>(e.data);
  std::string raw(static_cast<size_t>(e.bytes), '\0');
  float* dst = reinterpret_cast<float*>(raw.data());
  if (transposed) {
    const int64_t rows = e.shape[0], cols = e.shape[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  } else {
    std::memcpy(dst, src, raw.size());
  }
  t.set_data_type(onnx::TensorProto::FLOAT);
  out.place(t, raw.data(), raw.size());
}

// The ONNX tensor `tensor` (an initializer, or the output of an exporter's Identity of a shared
// one, which becomes an initializer of its own) set from `entry`; false where the model has
// neither. `split_off` counts the Identities replaced.
bool placeTrained(onnx::GraphProto& graph, std::map<std::string, onnx::TensorProto*>& initializers,
                  const std::string& tensor, const SafetensorsEntry& entry, bool transposed, const std::string& what,
                  TensorBytes& out, int& split_off) {
  if (auto it = initializers.find(tensor); it != initializers.end()) {
    setValues(*it->second, entry, transposed, what, out);
    return true;
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& n = graph.node(i);
    if (n.op_type() != "Identity" || n.output_size() != 1 || n.output(0) != tensor) continue;
    graph.mutable_node()->DeleteSubrange(i, 1);
    onnx::TensorProto* init = graph.add_initializer();
    init->set_name(tensor);
    for (int64_t d : entry.shape) init->add_dims(d);
    setValues(*init, entry, transposed, what, out);
    initializers[tensor] = init;
    ++split_off;
    return true;
  }
  return false;
}

// With external data, the untrained initializers move too: the input's external data (read in
// place) and inline tensors of 1 KiB or more, so the output holds no reference to the input's files.
void moveUntrained(const std::map<std::string, onnx::TensorProto*>& initializers, const std::set<std::string>& written,
                   const std::string& model_path, TensorBytes& out) {
  for (auto& [name, init] : initializers) {
    if (written.count(name)) continue;
    if (init->data_location() == onnx::TensorProto::EXTERNAL) {
      try {
        const ExternalBytes bytes = externalBytes(*init, directoryOf(model_path));
        out.place(*init, bytes.data, bytes.size);
      } catch (const ImportError& e) {
        throw Error(model_path + ": " + e.what());
      }
    } else if (init->raw_data().size() >= 1024) {
      const std::string raw = init->raw_data();
      out.place(*init, raw.data(), raw.size());
    }
  }
}

}  // namespace

WriteBack writeTrainedWeights(const std::string& model_path, const std::string& weights_path,
                              const std::string& output, bool external_data) {
  onnx::ModelProto model;
  try {
    model = readModel(model_path);
  } catch (const ImportError& e) {
    throw Error(e.what());
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  std::map<std::string, onnx::TensorProto*> initializers;
  for (auto& init : *graph.mutable_initializer()) initializers[init.name()] = &init;
  const SafetensorsFile weights(weights_path);
  // External data when asked, when the model has some, or when inline it would pass 2 GB.
  bool external = external_data;
  int64_t trained_bytes = 0;
  for (const auto& [name, entry] : weights.entries()) trained_bytes += entry.bytes;
  for (const auto& [name, init] : initializers) external |= init->data_location() == onnx::TensorProto::EXTERNAL;
  external |= static_cast<int64_t>(model.ByteSizeLong()) + trained_bytes > (int64_t{2} << 30) - (int64_t{1} << 20);
  TensorBytes out(output, external);
  std::set<std::string> written;
  WriteBack report;
  for (const auto& [name, entry] : weights.entries()) {
    if (entry.dtype != "F32") throw Error(weights_path + ": tensor '" + name + "' is " + entry.dtype + ", not F32");
    weights.verify(name);
    auto meta = weights.metadata().find(std::string(kOnnxOriginKey) + name);
    const std::string origins = meta != weights.metadata().end() ? meta->second : name;
    for (const std::string& origin : split(origins, ';')) {
      const auto [tensor, transposed] = parseOrigin(origin);
      const std::string what = "'" + name + "' -> ONNX '" + tensor + "'";
      if (!placeTrained(graph, initializers, tensor, entry, transposed, what, out, report.split_off))
        throw Error(weights_path + " holds " + what + ", which " + model_path +
                    " has neither as an initializer nor as an Identity output: were the weights trained from "
                    "a plan compiled from this model?");
      written.insert(tensor);
      ++report.updated;
    }
  }
  if (out.external()) moveUntrained(initializers, written, model_path, out);
  std::string bytes;
  if (model.ByteSizeLong() > (size_t{2} << 30) - 1)
    throw Error("the updated model exceeds protobuf's 2 GB limit even with its weights as external data");
  if (!model.SerializeToString(&bytes)) throw Error("cannot serialise the updated model");
  out.commit();  // the data first: the model file is what makes the new weights visible
  writeFileAtomically(output, bytes);
  report.model_bytes = bytes.size();
  if (out.external()) report.external_location = out.location(), report.external_bytes = out.size();
  return report;
}

}  // namespace mt::onnximport
