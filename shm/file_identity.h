// What a state file records about whom it belongs to, checked on every open so that an arena is
// never used by a network or dataDir it was not built for.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "shm/status.h"

namespace shmipam::shm {

struct FileIdentity {
    std::string data_dir;
    std::string network;
};

// /proc/sys/kernel/random/boot_id as 16 bytes (zeros when unreadable).
std::array<uint8_t, 16> read_boot_id();

// Copies s into a fixed NUL-terminated field; false when it does not fit.
bool copy_fixed(char* dst, size_t cap, const std::string& s);
std::string read_fixed(const char* src, size_t cap);

// Checks magic, version and the header checksum of a mapped state file of `size` bytes whose
// header is `header_bytes` long with the CRC at crc_offset. Errors name `path`.
Status check_header(const void* header, size_t size, const char (&magic)[8], size_t crc_offset,
                    const std::string& path);

}  // namespace shmipam::shm
