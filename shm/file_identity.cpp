#include "shm/file_identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "shm/crc32c.h"
#include "shm/format.h"
#include "shm/layout_fingerprint.h"

namespace shmipam::shm {

Expected<std::array<uint8_t, 16>> read_boot_id(const std::string& path) {
    const std::string fix = " (bootIdFile must name a file holding the kernel's boot id, as " +
                            std::string(kBootIdPath) + " does)";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return make_error(
            Code::kIo, "cannot read the boot id from " + path + ": " + std::strerror(errno) + fix);
    }
    char buf[64] = {};
    const ssize_t n = ::read(fd, buf, sizeof buf);
    const int err = errno;
    ::close(fd);
    if (n < 0) {
        return make_error(Code::kIo,
                          "cannot read the boot id from " + path + ": " + std::strerror(err) + fix);
    }
    const std::string text(buf, size_t(n));
    const bool newline_only_after = text.size() == 36 || (text.size() == 37 && text[36] == '\n');
    std::array<uint8_t, 16> id{};
    bool well_formed = newline_only_after;
    for (size_t i = 0, k = 0; well_formed && i < 36; ++i) {
        const char c = text[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            well_formed = c == '-';
            continue;
        }
        const int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        well_formed = v >= 0;
        if (well_formed) id[k / 2] = uint8_t(id[k / 2] | (k % 2 == 0 ? v << 4 : v));
        ++k;
    }
    if (!well_formed) {
        return make_error(Code::kIo, path + " does not hold a boot id" + fix,
                          std::to_string(text.size()) + " bytes");
    }
    return id;
}

bool copy_fixed(char* dst, size_t cap, const std::string& s) {
    if (s.size() >= cap) return false;
    std::memset(dst, 0, cap);
    std::memcpy(dst, s.data(), s.size());
    return true;
}

std::string read_fixed(const char* src, size_t cap) {
    return std::string(src, strnlen(src, cap));
}

Status check_header(const void* header, size_t size, const char (&magic)[8], size_t crc_offset,
                    size_t layout_offset, const std::string& path) {
    if (size < format::kHeaderBytes) {
        return make_error(Code::kArenaDamaged, "state file truncated: " + path,
                          std::to_string(size) + " bytes");
    }
    auto* bytes = static_cast<const uint8_t*>(header);
    if (std::memcmp(bytes, magic, 8) != 0) {
        return make_error(Code::kArenaForeign, "not a shmipam state file of this kind: " + path);
    }
    uint32_t version = 0;
    std::memcpy(&version, bytes + 8, 4);
    if (version != format::kFormatVersion) {
        return make_error(Code::kArenaVersion,
                          "state file has format version " + std::to_string(version) +
                              ", this shmipam reads version " +
                              std::to_string(format::kFormatVersion) + ": " + path);
    }
    uint32_t layout = 0;
    std::memcpy(&layout, bytes + layout_offset, 4);
    if (layout != format::kLayoutFingerprint) {
        char text[96];
        std::snprintf(text, sizeof text, "layout %08x, this build's is %08x", unsigned(layout),
                      unsigned(format::kLayoutFingerprint));
        return make_error(Code::kArenaVersion,
                          "state file was written by a build with another layout of format " +
                              std::to_string(version) + " (a struct in shm/format.h changed " +
                              "without a kFormatVersion bump): " + path,
                          text);
    }
    uint32_t stored = 0;
    std::memcpy(&stored, bytes + crc_offset, 4);
    if (crc32c(bytes, crc_offset) != stored) {
        return make_error(Code::kArenaDamaged, "state file header checksum mismatch: " + path);
    }
    return Ok{};
}

}  // namespace shmipam::shm
