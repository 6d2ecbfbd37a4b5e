#include "runtime/io/safetensors.h"


#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "runtime/io/checksum.h"
#include "runtime/io/error.h"
#include "runtime/io/json_input.h"

namespace mt {
namespace {

int64_t dtypeBytesOf(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "BF16" || dtype == "F16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  if (dtype == "F8_E4M3" || dtype == "F8_E5M2" || dtype == "F8_E8M0") return 1;  // FP8 checkpoints' (compiler/Fp8Blocks.h)
  return -1;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : path_(path), file_(path, "weights file", "") {
  auto bad = [&](const std::string& why) {
    return Error("weights file " + path + " is not valid safetensors: " + why);
  };
  const size_t size = file_.size();
  if (size < 8) throw bad("file is shorter than its 8-byte header length");
  const auto* base = reinterpret_cast<const std::byte*>(file_.data());
  uint64_t header_len;
  std::memcpy(&header_len, base, 8);
  if (header_len > size - 8) throw bad("header length runs past the end of the file");
  const std::string_view header_text(reinterpret_cast<const char*>(base) + 8, header_len);
  nlohmann::json header;
  try {
    header = parseJsonInput(header_text, "its header");
  } catch (const Error& e) {
    throw bad(e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const std::byte* data = base + 8 + header_len;
  const int64_t data_size = static_cast<int64_t>(size - 8 - header_len);
  for (auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      // As the reference library: a map of strings to strings, nothing nested.
      if (!value.is_object()) throw bad("__metadata__ is not an object");
      for (auto& [k, v] : value.items()) {
        if (!v.is_string())
          throw bad("__metadata__'s " + jsonBrief(nlohmann::json(k)) + " is " + jsonBrief(v) +
                    ", not a string (safetensors metadata maps strings to strings)");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object() || !value.contains("dtype") || !value["dtype"].is_string() ||
        !value.contains("shape") || !value["shape"].is_array() ||
        !value.contains("data_offsets") || !value["data_offsets"].is_array() ||
        value["data_offsets"].size() != 2)
      throw bad("entry '" + name + "' lacks dtype, shape or data_offsets");
    SafetensorsEntry e;
    e.dtype = value["dtype"].get<std::string>();
    const int64_t elem = dtypeBytesOf(e.dtype);
    if (elem < 0) throw bad("entry '" + name + "' has unknown dtype " + e.dtype);
    int64_t numel = 1;
    constexpr int64_t kMaxElements = int64_t{1} << 48;
    for (auto& d : value["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
        throw bad("entry '" + name + "' has an invalid shape");
      e.shape.push_back(d.get<int64_t>());
      // Checked before multiplying: the product must not overflow (issue 18).
      if (e.shape.back() != 0 && numel > kMaxElements / e.shape.back())
        throw bad("entry '" + name + "' is too large (more than 2^48 elements)");
      numel *= e.shape.back();
    }
    auto& offs = value["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      throw bad("entry '" + name + "' has invalid data_offsets");
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > static_cast<uint64_t>(data_size))
      throw bad("entry '" + name + "' lies outside the file (truncated?)");
    if (static_cast<int64_t>(end - begin) != numel * elem)
      throw bad("entry '" + name + "' has " + std::to_string(end - begin) +
                " bytes but its shape needs " + std::to_string(numel * elem));
    e.data = data + begin;
    e.bytes = static_cast<int64_t>(end - begin);
    entries_[name] = std::move(e);
  }
  checkLayout(data, data_size);
  // The checksums move from the metadata to their entries.
  constexpr size_t kPrefix = sizeof(kChecksumPrefix) - 1;
  for (auto it = metadata_.lower_bound(kChecksumPrefix);
       it != metadata_.end() && it->first.compare(0, kPrefix, kChecksumPrefix) == 0;) {
    const std::string name = it->first.substr(kPrefix);
    auto entry = entries_.find(name);
    if (entry == entries_.end()) throw bad("a checksum for '" + name + "', which is no tensor of the file");
    const std::string& digits = it->second;
    if (digits.size() != 8 || digits.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw bad("the checksum of '" + name + "' is not 8 hex digits");
    entry->second.crc32c = static_cast<uint32_t>(std::stoul(digits, nullptr, 16));
    it = metadata_.erase(it);
  }
}

// As the reference library: the tensors, in the order of their offsets, tile the data from its
// first byte to its last, each starting where the one before ends: no two share a byte (a write
// into one would change the other), and no byte lies outside every tensor.
void SafetensorsFile::checkLayout(const std::byte* data, int64_t data_size) const {
  std::vector<std::pair<int64_t, const std::string*>> starts;  // offset, name
  starts.reserve(entries_.size());
  for (const auto& [name, e] : entries_) starts.emplace_back(e.data - data, &name);
  std::sort(starts.begin(), starts.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : entries_.at(*a.second).bytes < entries_.at(*b.second).bytes;
  });
  int64_t next = 0;
  for (const auto& [begin, name] : starts) {
    if (begin != next)
      throw Error("weights file " + path_ + " is not valid safetensors: tensor '" + *name + "' starts at byte " +
                  std::to_string(begin) + " of the data, where " +
                  (begin < next ? "the tensor before it still runs (tensors overlap)"
                                : "byte " + std::to_string(next) + " was expected (a gap between tensors)"));
    next = begin + entries_.at(*name).bytes;
  }
  if (next != data_size)
    throw Error("weights file " + path_ + " is not valid safetensors: its tensors end at byte " +
                std::to_string(next) + " of the data, but the file holds " + std::to_string(data_size) +
                " bytes after the header (bytes no tensor covers)");
}

void SafetensorsFile::verify(const std::string& name) const {
  const SafetensorsEntry& e = entries_.at(name);
  if (!e.crc32c) return;
  const uint32_t computed = crc32c(e.data, static_cast<size_t>(e.bytes));
  if (computed != *e.crc32c)
    throw Error("weights file " + path_ + ": tensor '" + name + "' does not match its checksum (crc32c " +
                hex32(computed) + ", written as " + hex32(*e.crc32c) +
                "): the file changed after it was written (a flipped bit on disk or in a copy); use another "
                "copy, or an earlier checkpoint");
}

const SafetensorsEntry& SafetensorsFile::f32(const std::string& name,
                                             const std::vector<int64_t>& shape) const {
  const SafetensorsEntry& entry = f32Header(name, shape);
  verify(name);
  return entry;
}

const SafetensorsEntry& SafetensorsFile::f32Header(const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw Error("weights file " + path_ + " has no tensor '" + name +
                "' (was it written for another model?)");
  if (it->second.dtype != "F32" || it->second.shape != shape) {
    throw Error("weights file " + path_ + ": tensor '" + name + "' is " + it->second.dtype + " [" +
                shapeText(it->second.shape) + "] but the plan needs F32 [" + shapeText(shape) + "]");
  }
  return it->second;
}

const float* f32Values(const SafetensorsTensor& t, std::vector<float>& staged) {
  if (t.data) return static_cast<const float*>(t.data);
  staged.resize(static_cast<size_t>(std::max<int64_t>(t.bytes / 4, 1)));
  t.produce(staged.data());
  return staged.data();
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string text;
  for (auto d : shape) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

void writeSafetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Checksums are written as placeholders of their final width, patched once each tensor is out.
  // The header is put together entry by entry, each entry's place noted as it goes: tens of
  // thousands of tensors (each expert's adapters, mtrun --export-peft) in time linear in them.
  constexpr char kPlaceholder[] = "00000000";
  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : metadata)
    if (key.rfind(kChecksumPrefix, 0) != 0) meta[key] = value;
  for (const auto& t : tensors) meta[kChecksumPrefix + t.name] = kPlaceholder;
  auto quoted = [](const std::string& text) { return nlohmann::json(text).dump(); };
  std::map<std::string, size_t> checksum_at;  // a tensor's name -> its placeholder's place in `head`
  std::string head = "{\"__metadata__\":{";
  for (const auto& [key, value] : meta) {
    if (head.back() != '{') head += ',';
    head += quoted(key) + ':';
    if (key.rfind(kChecksumPrefix, 0) == 0) checksum_at[key.substr(std::strlen(kChecksumPrefix))] = head.size() + 1;
    head += quoted(value);
  }
  head += '}';
  if (checksum_at.size() != tensors.size() || checksum_at.count("__metadata__"))
    throw Error("internal: two tensors of one name, or one named __metadata__, in " + path);
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const nlohmann::ordered_json entry = {{"dtype", t.dtype}, {"shape", t.shape},
                                          {"data_offsets", {offset, offset + t.bytes}}};
    head += ',' + quoted(t.name) + ':' + entry.dump();
    offset += t.bytes;
  }
  head += '}';
  head.append((8 - head.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t len = head.size();
  AtomicFileWriter file(path);
  file.write(&len, 8);
  file.write(head.data(), head.size());
  for (const auto& t : tensors) {
    const void* bytes = t.data;
    std::unique_ptr<std::byte[]> buffer;
    if (!bytes) {
      buffer.reset(new std::byte[std::max<int64_t>(t.bytes, 1)]);
      t.produce(buffer.get());
      bytes = buffer.get();
    }
    file.write(bytes, t.bytes);
    const std::string digits = hex32(crc32c(bytes, static_cast<size_t>(t.bytes)));
    file.writeAt(8 + checksum_at.at(t.name), digits.data(), digits.size());
  }
  file.commit();
}

}  // namespace mt
