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
// The boot id (a UUID file, /proc/sys/kernel/random/boot_id by default) as 16 bytes; zeros when
// unreadable. The path is configurable so tests can simulate a reboot.
std::array<uint8_t, 16> read_boot_id(const char* path = kBootIdPath);

// Copies s into a fixed NUL-terminated field; false when it does not fit.
bool copy_fixed(char* dst, size_t cap, const std::string& s);
std::string read_fixed(const char* src, size_t cap);

// Checks magic, version, layout fingerprint (at layout_offset) and the header checksum (at
// crc_offset) of a mapped state file of `size` bytes. Errors name `path`.
Status check_header(const void* header, size_t size, const char (&magic)[8], size_t crc_offset,
                    size_t layout_offset, const std::string& path);

}  // namespace shmipam::shm
