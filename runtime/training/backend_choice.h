// The backend a run asks for (mtrun's and mtgen's --backend), parsed once at the tools' edge
// into this enum: chooseBackend (run_setup.h) decides from it where the run lands.
#pragma once
#include <map>
#include <string>

namespace mt {

enum class BackendChoice { kAuto, kCpu, kCuda };

// The flag's names, for tools' choiceOf.
inline const std::map<std::string, BackendChoice>& backendChoiceNames() {
  static const std::map<std::string, BackendChoice> names = {
      {"auto", BackendChoice::kAuto}, {"cpu", BackendChoice::kCpu}, {"cuda", BackendChoice::kCuda}};
  return names;
}

}  // namespace mt
