// The storage trace: test builds' record of every change shmipam makes to files that must
// survive power loss (journal segments, checkpoints, their directory), so a test can replay a
// power cut that drops any subset of what was not yet synced, as LevelDB's fault-injection
// environment does. Compiled in only with SHMIPAM_FAULT_POINTS; elsewhere every hook is nothing.
//
// Trace file (one line per event, appended with O_APPEND so concurrent processes' lines keep the
// order of their system calls):
//   W <path> <offset> <length>   about to write these bytes (logged before the write)
//   S <path>                     fsync/fdatasync of the file returned (logged after)
//   C <path>                     the file appeared under its name (link returned)
//   D <dir>                      fsync of the directory returned
//   U <path> <saved>             about to unlink; a hard link to the file was saved first
//   B <command> <container id>   an invocation began (before it opened the network)
//   A <command> <container id>   it succeeded and is about to print its answer
// A write is durable iff an S of its file follows it; a name (C or U) iff a D of its directory
// follows it. The simulator is tests/support/power_cut.h.
#pragma once

#include <cstdint>
#include <string>

namespace shmipam::storage_trace {

#ifdef SHMIPAM_FAULT_POINTS
// Starts tracing into `path` (the plugin reads it from SHMIPAM_STORAGE_TRACE).
void open(const std::string& path);
void write(const std::string& path, uint64_t offset, uint64_t length);
void synced(const std::string& path);
void created(const std::string& path);
void dir_synced(const std::string& dir);
void unlinking(const std::string& path);
void began(const std::string& command, const std::string& container_id);
void answering(const std::string& command, const std::string& container_id);
#define SHMIPAM_TRACE(call) ::shmipam::storage_trace::call
#else
#define SHMIPAM_TRACE(call) ((void)0)
#endif

}  // namespace shmipam::storage_trace
