#include "runtime/data/utf8.h"

namespace mt {
namespace {

bool printableLatin1(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

// The code point byte b is written as (GPT-2's bytes_to_unicode).
std::array<char32_t, 256> byteLevelCodePoints() {
  std::array<char32_t, 256> cps{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) cps[b] = printableLatin1(b) ? static_cast<char32_t>(b) : next++;
  return cps;
}

}  // namespace

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<char32_t> decodeUtf8(const std::string& s) {
  // Replacing first makes a malformed sequence one U+FFFD, as TextDecoder (and so every
  // JavaScript reference we test against) reads it; what is left is well-formed.
  const std::string valid = validUtf8(s);
  std::vector<char32_t> out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size();) {
    const unsigned char c = valid[i];
    const int len = utf8SequenceLength(c);
    char32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(valid[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string validUtf8(const std::string& bytes) {
  // The WHATWG decoder (TextDecoder, Node's "utf8"): a lead byte and the continuation bytes that
  // can still follow it are one U+FFFD when the sequence breaks off; a byte that cannot begin a
  // sequence is one U+FFFD; overlong forms, surrogates and code points past U+10FFFF cannot occur.
  std::string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = bytes[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    int need = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the next byte
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      low = c == 0xE0 ? 0xA0 : 0x80;
      high = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      low = c == 0xF0 ? 0x90 : 0x80;
      high = c == 0xF4 ? 0x8F : 0xBF;
    } else {
      appendUtf8(out, 0xFFFD);
      ++i;
      continue;
    }
    size_t j = i + 1;
    int seen = 0;
    for (; seen < need && j < n; ++seen, ++j) {
      const unsigned char cc = bytes[j];
      if (cc < low || cc > high) break;
      low = 0x80;
      high = 0xBF;
    }
    if (seen == need) {
      out.append(bytes, i, j - i);
    } else {
      appendUtf8(out, 0xFFFD);
    }
    i = j;
  }
  return out;
}

std::string byteLevelString(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) out += byteLevelChars()[b];
  return out;
}

const std::array<std::string, 256>& byteLevelChars() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> out;
    const auto cps = byteLevelCodePoints();
    for (int b = 0; b < 256; ++b) appendUtf8(out[b], cps[b]);
    return out;
  }();
  return chars;
}

int byteLevelByte(char32_t c) {
  static const std::vector<int> bytes = [] {
    std::vector<int> out(512, -1);  // every byte-level code point is below 256 + 256
    const auto cps = byteLevelCodePoints();
    for (int b = 0; b < 256; ++b) out[cps[b]] = b;
    return out;
  }();
  return c < bytes.size() ? bytes[c] : -1;
}

}  // namespace mt
