// What the runtime's tests share to check a refusal: the error is an mt::Error and names the
// problem.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "runtime/io/error.h"

namespace mt::test {

// Expects `f` to throw mt::Error whose message contains `needle`.
template <typename F>
void expectError(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace mt::test
