#include "shm/index_file.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/unique_id.h"
#include "shm/atomic_word.h"
#include "shm/crc32c.h"
#include "shm/file_system.h"
#include "shm/layout_fingerprint.h"

namespace shmipam::shm {

using format::IndexHeader;

namespace {
constexpr size_t lease_bytes() {
    return format::kLeaseCount * (sizeof(uint64_t) + sizeof(format::LeaseSide));
}
}  // namespace

size_t IndexFile::file_bytes_for(const IndexGeometry& g) {
    return format::kHeaderBytes + lease_bytes() + size_t(g.entry_count) * sizeof(format::Entry);
}

bool IndexFile::retired() const {
    return load_word(header_->retired) != 0;
}

bool IndexFile::retire() {
    uint64_t expected = 0;
    return cas_word(header_->retired, expected, 1);
}

Expected<IndexFile> IndexFile::open_or_create(const std::string& dir, const IndexGeometry& g,
                                              const FileIdentity& who,
                                              const std::array<uint8_t, 16>& boot_id,
                                              const Prefill& prefill) {
    const size_t bytes = file_bytes_for(g);
    auto created = create_published(dir, kFileName, bytes, [&](std::span<std::byte> mem) -> Status {
        auto* h = reinterpret_cast<IndexHeader*>(mem.data());
        std::memcpy(h->magic, format::kIndexMagic, 8);
        h->version = format::kFormatVersion;
        h->layout = format::kLayoutFingerprint;
        h->header_bytes = format::kHeaderBytes;
        h->entry_count = g.entry_count;
        h->entry_bytes = sizeof(format::Entry);
        h->lease_count = format::kLeaseCount;
        h->lease_offset = format::kHeaderBytes;
        h->entries_offset = format::kHeaderBytes + lease_bytes();
        h->file_bytes = bytes;
        h->block_prefix_v4 = g.block_prefix_v4;
        h->block_prefix_v6 = g.block_prefix_v6;
        h->created_unix_ns = base::unix_ns();
        h->epoch = base::unique_id();
        std::memcpy(h->boot_id, boot_id.data(), 16);
        if (!copy_fixed(h->data_dir, sizeof h->data_dir, who.data_dir) ||
            !copy_fixed(h->network, sizeof h->network, who.network)) {
            return make_error(Code::kInvalidConfig, "dataDir or network name too long");
        }
        h->header_crc = crc32c(h, offsetof(IndexHeader, header_crc));
        if (!prefill) return Ok{};
        IndexFile aside;
        if (auto st = aside.bind(mem.data(), mem.size(), dir + "/" + kFileName, &who); !st) {
            return st;
        }
        return prefill(aside);
    });
    if (!created) return created.error();
    const std::string path = dir + "/" + kFileName;
    auto index = open_existing(path, Access::kReadWrite, &who);
    if (!index && index.error().code == Code::kIo && !file_exists(path)) {
        // Published (by us or a racing creator) and removed again before we mapped it: another
        // invocation retired it. The state is being replaced, not failing.
        return being_replaced(index.error());
    }
    return index;
}

Error IndexFile::being_replaced(const Error& cause) {
    return make_error(Code::kTryAgainLater,
                      "the network's state is being replaced (its index vanished while it was "
                      "opened): try again",
                      cause.msg);
}

Expected<IndexFile> IndexFile::open_existing(const std::string& path, Access access,
                                             const FileIdentity* who) {
    auto mapped = MappedFile::open(path, access);
    if (!mapped) return mapped.error();
    IndexFile f;
    f.map_ = std::move(*mapped);
    if (auto st = f.bind(f.map_.data(), f.map_.size(), path, who); !st) return st.error();
    return f;
}

Expected<std::optional<uint64_t>> IndexFile::epoch_at(const std::string& path) {
    FileSystem& fs = file_system();
    const int fd = fs.open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return std::optional<uint64_t>();
        return io_error("cannot open", path);
    }
    IndexHeader h{};
    const ssize_t n = fs.pread(fd, &h, sizeof h, 0);
    fs.close(fd);
    if (n != ssize_t(sizeof h) || std::memcmp(h.magic, format::kIndexMagic, 8) != 0) {
        return make_error(Code::kArenaDamaged, "not a readable index: " + path);
    }
    return std::optional<uint64_t>(h.epoch);
}

Status IndexFile::bind(std::byte* base, size_t size, const std::string& path,
                       const FileIdentity* who) {
    if (auto st = check_header(base, size, format::kIndexMagic, offsetof(IndexHeader, header_crc),
                               offsetof(IndexHeader, layout), path);
        !st) {
        return st;
    }
    auto* h = reinterpret_cast<IndexHeader*>(base);
    const IndexGeometry g{h->entry_count, h->block_prefix_v4, h->block_prefix_v6};
    const bool pow2 = h->entry_count != 0 && (h->entry_count & (h->entry_count - 1)) == 0;
    if (!pow2 || h->entry_bytes != sizeof(format::Entry) || h->lease_count != format::kLeaseCount ||
        h->lease_offset != format::kHeaderBytes ||
        h->entries_offset != format::kHeaderBytes + lease_bytes() ||
        h->file_bytes != file_bytes_for(g) || h->file_bytes != size) {
        return make_error(Code::kArenaDamaged, "index file geometry is inconsistent: " + path,
                          "size " + std::to_string(size));
    }
    if (who != nullptr) {
        if (read_fixed(h->data_dir, sizeof h->data_dir) != who->data_dir) {
            return make_error(Code::kArenaForeign, "arena " + path + " belongs to dataDir " +
                                                       read_fixed(h->data_dir, sizeof h->data_dir) +
                                                       ", not " + who->data_dir);
        }
        if (read_fixed(h->network, sizeof h->network) != who->network) {
            return make_error(Code::kArenaForeign, "arena " + path + " belongs to network " +
                                                       read_fixed(h->network, sizeof h->network));
        }
    }
    header_ = h;
    entry_count_ = h->entry_count;
    auto* words = reinterpret_cast<uint64_t*>(base + h->lease_offset);
    auto* sides = reinterpret_cast<format::LeaseSide*>(base + h->lease_offset +
                                                       h->lease_count * sizeof(uint64_t));
    leases_ =
        LeaseTable(std::span<uint64_t>(words, h->lease_count),
                   std::span<format::LeaseSide>(sides, h->lease_count), map_.fd(), h->lease_offset);
    entries_ = reinterpret_cast<format::Entry*>(base + h->entries_offset);
    return Ok{};
}

}  // namespace shmipam::shm
