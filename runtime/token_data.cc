#include "runtime/token_data.h"


#include <cstring>

#include "runtime/error.h"

namespace mt {
namespace {

constexpr size_t kHeaderBytes = 32;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

TokenFile::TokenFile(const std::string& path) : file_(path, "token file", "(make one with mttok)") {
  auto bad = [&](const std::string& why) {
    return Error("token file " + path + " is invalid: " + why + " (re-create it with mttok)");
  };
  const size_t size = file_.size();
  if (size < kHeaderBytes) throw bad("shorter than its 32-byte header");
  const unsigned char* base = file_.data();
  uint32_t version;
  uint64_t count;
  std::memcpy(&version, base + 8, 4);
  std::memcpy(&bytes_per_token_, base + 12, 4);
  std::memcpy(&count, base + 16, 8);
  std::memcpy(&vocab_, base + 24, 4);
  if (std::memcmp(base, kTokenMagic, 8) != 0) throw bad("bad magic (not a MegaTrain token file)");
  if (version != kTokenVersion)
    throw bad("version " + std::to_string(version) + ", this reader knows " + std::to_string(kTokenVersion));
  if (bytes_per_token_ != 2 && bytes_per_token_ != 4)
    throw bad("bytes per token is " + std::to_string(bytes_per_token_) + ", not 2 or 4");
  if (vocab_ == 0) throw bad("vocab size is 0");
  if (count > (size - kHeaderBytes) / bytes_per_token_ || count * bytes_per_token_ != size - kHeaderBytes)
    throw bad("header says " + std::to_string(count) + " tokens but the file holds " +
              std::to_string((size - kHeaderBytes) / bytes_per_token_) + " (truncated?)");
  count_ = static_cast<int64_t>(count);
  tokens_ = base + kHeaderBytes;
  for (int64_t i = 0; i < count_; ++i)
    if (at(i) >= vocab_)
      throw bad("token " + std::to_string(i) + " is " + std::to_string(at(i)) + ", not below the vocab size " +
                std::to_string(vocab_));
}

uint32_t TokenFile::at(int64_t i) const {
  if (bytes_per_token_ == 2) {
    uint16_t v;
    std::memcpy(&v, tokens_ + 2 * i, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, tokens_ + 4 * i, 4);
  return v;
}

void writeTokenFile(const std::string& path, const std::vector<uint32_t>& ids, uint32_t vocab_size) {
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  std::string bytes(kHeaderBytes + ids.size() * width, '\0');
  const uint64_t count = ids.size();
  const uint32_t reserved = 0;
  std::memcpy(&bytes[0], kTokenMagic, 8);
  std::memcpy(&bytes[8], &kTokenVersion, 4);
  std::memcpy(&bytes[12], &width, 4);
  std::memcpy(&bytes[16], &count, 8);
  std::memcpy(&bytes[24], &vocab_size, 4);
  std::memcpy(&bytes[28], &reserved, 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) throw Error("token id " + std::to_string(ids[i]) + " >= vocab size");
    if (width == 2) {
      const uint16_t v = static_cast<uint16_t>(ids[i]);
      std::memcpy(&bytes[kHeaderBytes + 2 * i], &v, 2);
    } else {
      std::memcpy(&bytes[kHeaderBytes + 4 * i], &ids[i], 4);
    }
  }
  writeFileAtomically(path, bytes);
}

BatchSampler::BatchSampler(const TokenFile& data, int64_t batch, int64_t seq, uint64_t seed, int64_t begin,
                           int64_t end)
    : data_(data), batch_(batch), seq_(seq), seed_(seed), begin_(begin), end_(end < 0 ? data.size() : end) {
  if (begin_ < 0 || end_ > data.size() || end_ - begin_ < seq + 1)
    throw Error("token file has " + std::to_string(end_ - begin_) + " tokens to sample from; a sequence of " +
                std::to_string(seq) + " needs at least " + std::to_string(seq + 1));
}

void BatchSampler::fill(int64_t step, int32_t* tokens, int32_t* targets) const {
  const uint64_t windows = static_cast<uint64_t>(end_ - begin_ - seq_);
  for (int64_t b = 0; b < batch_; ++b) {
    const uint64_t key = mix(mix(seed_ ^ 0x5eed) ^ (uint64_t(step) << 20) ^ uint64_t(b));
    const int64_t start = begin_ + static_cast<int64_t>(key % windows);
    for (int64_t t = 0; t < seq_; ++t) {
      tokens[b * seq_ + t] = static_cast<int32_t>(data_.at(start + t));
      targets[b * seq_ + t] = static_cast<int32_t>(data_.at(start + t + 1));
    }
  }
}

}  // namespace mt
