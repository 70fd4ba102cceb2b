// Writing journal bytes and making them durable. Two backends:
//   fdatasync  pwrite, then fdatasync
//   io_uring   one submission: a write linked to an fdatasync (liburing)
// io_uring falls back to fdatasync when the kernel or a seccomp profile refuses it (ENOSYS,
// EPERM, kernel.io_uring_disabled); the fallback is reported once through `note`. Which one is
// the default is decided by measurement (docs/durability.md). No lock is held across a sync:
// the kernel groups concurrent flushes of one file.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>

#include "base/status.h"

namespace shmipam::shm {

enum class SyncMode {
    kNone,       // write only (tmpfs, or durability "none")
    kFdatasync,  // pwrite + fdatasync
    kIoUring,    // linked write + fdatasync in one io_uring submission
};

// Writes len bytes at off and, unless kNone, makes them durable before returning. kIo on failure
// (a short write, ENOSPC, EIO...). `used` tells which backend did it.
Status write_durably(int fd, const void* buf, size_t len, off_t off, SyncMode mode,
                     SyncMode* used = nullptr);

}  // namespace shmipam::shm
