// The compiler driver behind mtc: model -> mt IR -> passes -> plan (+ initial weights). What it
// is asked to do is CompileOptions (CompileOptions.h).
#pragma once
#include <string>

#include "compiler/CompileOptions.h"

namespace mt {

// Runs the compiler; returns the process exit code (diagnostics on stderr).
int compile(const CompileOptions& options);

}  // namespace mt
