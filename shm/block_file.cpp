#include "shm/block_file.h"

#include <cstring>

#include "base/clock.h"
#include "shm/atomic_word.h"
#include "shm/crc32c.h"
#include "shm/layout_fingerprint.h"

namespace shmipam::shm {

using format::BlockHeader;

namespace {

size_t bitmap_bytes(uint64_t slots) {
    const size_t words = size_t((slots + 63) / 64);
    return (words * 8 + format::kCacheLine - 1) / format::kCacheLine * format::kCacheLine;
}

}  // namespace

size_t BlockFile::file_bytes_for(const BlockGeometry& g) {
    return format::kHeaderBytes + bitmap_bytes(g.slot_count()) +
           size_t(g.slot_count()) * sizeof(format::Slot);
}

BlockGeometry BlockFile::geometry() const {
    BlockGeometry g;
    g.family = header().family;
    g.prefix = header().prefix;
    std::memcpy(g.base.data(), header().base, 16);
    return g;
}

bool BlockFile::retired() const {
    return load_word(header().retired) != 0;
}

Expected<BlockFile> BlockFile::open_or_create(const std::string& dir, const std::string& name,
                                              const BlockGeometry& g, const FileIdentity& who,
                                              const Prefill& prefill) {
    const size_t bytes = file_bytes_for(g);
    auto created = create_published(dir, name, bytes, [&](std::span<std::byte> mem) -> Status {
        auto* h = reinterpret_cast<BlockHeader*>(mem.data());
        std::memcpy(h->magic, format::kBlockMagic, 8);
        h->version = format::kFormatVersion;
        h->layout = format::kLayoutFingerprint;
        h->header_bytes = format::kHeaderBytes;
        h->family = g.family;
        h->prefix = g.prefix;
        std::memcpy(h->base, g.base.data(), 16);
        h->slot_count = g.slot_count();
        h->slot_bytes = sizeof(format::Slot);
        h->bitmap_offset = format::kHeaderBytes;
        h->slots_offset = format::kHeaderBytes + bitmap_bytes(g.slot_count());
        h->file_bytes = bytes;
        h->created_unix_ns = base::unix_ns();
        // Shown by dump-file, never judged (the index's boot id is): zeros when unreadable.
        if (auto boot = read_boot_id()) std::memcpy(h->boot_id, boot->data(), 16);
        if (!copy_fixed(h->data_dir, sizeof h->data_dir, who.data_dir) ||
            !copy_fixed(h->network, sizeof h->network, who.network)) {
            return make_error(Code::kInvalidConfig, "dataDir or network name too long");
        }
        h->header_crc = crc32c(h, offsetof(BlockHeader, header_crc));
        if (!prefill) return Ok{};
        BlockFile aside;
        if (auto st = aside.bind(mem.data(), mem.size(), dir + "/" + name, &g, &who); !st)
            return st;
        return prefill(aside);
    });
    if (!created) return created.error();
    auto mapped = MappedFile::open(dir + "/" + name, Access::kReadWrite);
    if (!mapped) return mapped.error();
    BlockFile b;
    b.map_ = std::move(*mapped);
    if (auto st = b.check(&g, &who); !st) return st.error();
    return b;
}

Expected<BlockFile> BlockFile::open_existing(const std::string& path, Access access,
                                             const FileIdentity* who) {
    auto mapped = MappedFile::open(path, access);
    if (!mapped) return mapped.error();
    BlockFile b;
    b.map_ = std::move(*mapped);
    if (auto st = b.check(nullptr, who); !st) return st.error();
    return b;
}

Status BlockFile::check(const BlockGeometry* expected, const FileIdentity* who) {
    return bind(map_.data(), map_.size(), map_.path(), expected, who);
}

Status BlockFile::bind(std::byte* base, size_t size, const std::string& path,
                       const BlockGeometry* expected, const FileIdentity* who) {
    if (auto st = check_header(base, size, format::kBlockMagic, offsetof(BlockHeader, header_crc),
                               offsetof(BlockHeader, layout), path);
        !st) {
        return st;
    }
    base_ = base;
    path_ = path;
    const BlockHeader& h = header();
    BlockGeometry g = geometry();
    const int bits = g.family == 4 ? 32 : g.family == 6 ? 128 : 0;
    if (bits == 0 || g.prefix > bits || bits - g.prefix > 24 || h.slot_count != g.slot_count() ||
        h.slot_bytes != sizeof(format::Slot) || h.bitmap_offset != format::kHeaderBytes ||
        h.slots_offset != format::kHeaderBytes + bitmap_bytes(h.slot_count) ||
        h.file_bytes != file_bytes_for(g) || h.file_bytes != size) {
        return make_error(Code::kArenaDamaged, "block file geometry is inconsistent: " + path,
                          "size " + std::to_string(size));
    }
    if (expected != nullptr && (g.family != expected->family || g.prefix != expected->prefix ||
                                g.base != expected->base)) {
        return make_error(Code::kArenaForeign, "block file holds another block: " + path);
    }
    if (who != nullptr) {
        if (read_fixed(h.data_dir, sizeof h.data_dir) != who->data_dir) {
            return make_error(Code::kArenaForeign, "arena " + path + " belongs to dataDir " +
                                                       read_fixed(h.data_dir, sizeof h.data_dir) +
                                                       ", not " + who->data_dir);
        }
        if (read_fixed(h.network, sizeof h.network) != who->network) {
            return make_error(Code::kArenaForeign, "arena " + path + " belongs to network " +
                                                       read_fixed(h.network, sizeof h.network));
        }
    }
    slot_count_ = h.slot_count;
    bitmap_ = reinterpret_cast<uint64_t*>(base + h.bitmap_offset);
    slots_ = reinterpret_cast<format::Slot*>(base + h.slots_offset);
    return Ok{};
}

}  // namespace shmipam::shm
