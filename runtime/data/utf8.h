// UTF-8 and the byte-level alphabet that GPT-2-style BPE tokenisers share: every byte is
// written as one printable character (printable Latin-1 bytes as themselves, the rest as
// U+0100 + n), so a vocabulary of strings can name every byte sequence.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// Appends code point `cp` to `out` as UTF-8.
void appendUtf8(std::string& out, char32_t cp);

// The length of the UTF-8 sequence that `lead` begins, in well-formed text (validUtf8's output).
inline int utf8SequenceLength(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// Code points of UTF-8 text; each ill-formed sequence becomes one U+FFFD, as TextDecoder
// reads it (validUtf8 below).
std::vector<char32_t> decodeUtf8(const std::string& s);

// `bytes` with every ill-formed UTF-8 sequence replaced by U+FFFD, as TextDecoder does it.
std::string validUtf8(const std::string& bytes);

// Byte b's character in the byte-level alphabet, as UTF-8.
const std::array<std::string, 256>& byteLevelChars();
// `bytes` written in the byte-level alphabet (each byte its character): how GPT-2-style
// vocabularies spell them.
std::string byteLevelString(const std::string& bytes);

// The byte a byte-level character stands for, or -1 for a character outside the alphabet.
int byteLevelByte(char32_t c);

}  // namespace mt
