// Listing a directory's entries, for every layer. opendir(3) allocates a 32 KiB buffer on the
// heap and adds an fstat: on an exec'd plugin, that is a fresh heap page or two faulted in and
// one more kernel entry per listing, each of which costs here far more than the listing itself
// (docs/performance.md, "What an exec costs here"). This reads the entries with getdents64 into a
// buffer on the stack.
#pragma once

#include <string>
#include <string_view>

#include "base/function_ref.h"

namespace shmipam::base {

// Calls `visit` with each entry's name ("." and ".." left out), in the file system's order.
// Returns 0, or the errno of opening or reading the directory (entries visited before a read
// error stay visited). The visitor may create or remove entries of the directory: as with
// readdir, an entry added or removed meanwhile may or may not be visited.
int for_each_entry(const std::string& dir, FunctionRef<void(std::string_view name)> visit);

}  // namespace shmipam::base
