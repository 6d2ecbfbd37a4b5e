// A folder written whole or not at all (an --export-hf folder: config.json, weights, tokenizer):
// its files go into a staging folder beside the target, published by one rename — or, where the
// target already exists, one atomic exchange of the two (renameat2 RENAME_EXCHANGE) — so that a
// reader, or a run killed on the way, sees the old folder or the whole new one, never a mix of
// old and new files.
#pragma once
#include <string>

namespace mt {

class AtomicFolderWriter {
 public:
  // Creates the staging folder TARGET.tmp.<pid>.<random> beside `target` (its parent created if
  // missing), never through a symlink. Throws mt::Error naming the target and the reason.
  explicit AtomicFolderWriter(const std::string& target);
  // Without commit() (an error on the way), the staging folder and what it holds are removed.
  ~AtomicFolderWriter();
  AtomicFolderWriter(const AtomicFolderWriter&) = delete;
  AtomicFolderWriter& operator=(const AtomicFolderWriter&) = delete;

  // Where to write the folder's files.
  const std::string& staging() const { return staging_; }
  // Publishes the staging folder as the target: renamed into place, or exchanged with the
  // existing target whose old contents are then removed. Throws mt::Error.
  void commit();

 private:
  std::string target_, staging_;
};

// `path` without trailing slashes ("out/" -> "out"), so that a sibling named from it lies beside
// the folder, not inside it.
std::string withoutTrailingSlashes(const std::string& path);

}  // namespace mt
