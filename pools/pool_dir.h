// Reads a pools directory: every *.yaml, *.yml and *.json file in it (not in subdirectories;
// names starting with '.' are skipped, so a sync that writes a temp file and renames it is never
// read half-written). A file may hold several objects: YAML documents separated by `---`, and
// `kind: List` (or any `...List`) objects with `items`, as `kubectl get -o yaml` writes them.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "pools/catalog.h"

namespace shmipam::pools {

// Code 7 when the directory cannot be listed (its name in the message); a bad file or object
// is a Problem in the catalog, never an error of the whole directory.
Expected<Catalog> load_pools_dir(const std::string& dir);

// What a pools directory's snapshot is keyed on: the directory itself and every file
// load_pools_dir reads, each with its size, inode, mtime and ctime (nanoseconds). `racy` is set
// when one of them changed within the last two seconds: a change inside the same timestamp tick
// could go unseen, so no snapshot is written from such a state (git's racy-index rule). Code 7
// when the directory cannot be read.
Expected<std::string> directory_stamp(const std::string& dir, bool* racy);

// Whether a stamp still describes `dir`, checked without listing it: the directory's times
// change whenever a file is added, removed or renamed in it, and each file it names is stat'ed
// (an edit in place changes that file's times). One stat per file and one for the directory
// (a listing costs four system calls more, and every system call here costs a cold TLB after).
bool stamp_holds(const std::string& dir, std::string_view stamp);

// The same for one file's text (tests, `shmipamctl explain --pools FILE`).
void load_text(Catalog& catalog, const std::string& file_name, const std::string& text);

}  // namespace shmipam::pools
