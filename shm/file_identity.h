// What a state file records about whom it belongs to, checked on every open so that an arena is
// never used by a network or dataDir it was not built for.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace shmipam::shm {

struct FileIdentity {
    std::string data_dir;
    std::string network;
};

inline constexpr const char* kBootIdPath = "/proc/sys/kernel/random/boot_id";
// The boot id as 16 bytes, from a file holding it exactly as the kernel writes
// /proc/sys/kernel/random/boot_id: 36 characters, 8-4-4-4-12 lowercase hex digits and dashes,
// then at most a newline. The path is configurable (bootIdFile) so tests can simulate a reboot.
// kIo, naming the file, when it cannot be read or holds anything else: an invocation that does
// not know the boot must not judge the state to be from another one (it would retire the live
// state and reclaim every allocation).
Expected<std::array<uint8_t, 16>> read_boot_id(const std::string& path = kBootIdPath);

// Copies s into a fixed NUL-terminated field; false when it does not fit.
bool copy_fixed(char* dst, size_t cap, const std::string& s);
std::string read_fixed(const char* src, size_t cap);

// Checks magic, version, layout fingerprint (at layout_offset) and the header checksum (at
// crc_offset) of a mapped state file of `size` bytes. Errors name `path`.
Status check_header(const void* header, size_t size, const char (&magic)[8], size_t crc_offset,
                    size_t layout_offset, const std::string& path);

}  // namespace shmipam::shm
