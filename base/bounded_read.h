// The whole of a small file (a pool file, a kubeconfig, a certificate, a token), read to at most a
// bound: a device or a huge file named by mistake is refused without being read whole.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace shmipam::base {

// The file's bytes. Code 7 with the reason alone, for the caller to name the file: the system's
// ("No such file or directory") or "larger than 16 MiB" (the bound, in MiB when it is whole ones).
Expected<std::string> read_bounded(const std::string& path, size_t max_bytes);

}  // namespace shmipam::base
