// Mapping a network's blocks on demand and keeping them for the invocation (block_for), and
// opening an existing state for the tools. Creation and retirement live in lifecycle.cpp.
#include "engine/state/network_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/directory.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

uint8_t NetworkStore::block_prefix(Family f) const {
    return f == Family::kV4 ? prefix_v4_ : prefix_v6_;
}

IpAddress NetworkStore::block_base(const IpAddress& a) const {
    Cidr c{a, block_prefix(a.family)};
    return c.network();
}

std::string NetworkStore::block_file_name(const IpAddress& base, int prefix, uint64_t epoch) {
    std::string s = base.to_string();
    std::replace(s.begin(), s.end(), ':', '-');  // keep names friendly to every tool
    char e[24];
    std::snprintf(e, sizeof e, ".%016llx", (unsigned long long)epoch);
    return s + "_" + std::to_string(prefix) + e + ".blk";
}

Expected<std::unique_ptr<NetworkStore>> NetworkStore::open_existing(const std::string& state_dir,
                                                                    shm::Access access) {
    std::unique_ptr<NetworkStore> s(new NetworkStore());
    s->dir_ = state_dir;
    s->access_ = access;
    auto index =
        shm::IndexFile::open_existing(state_dir + "/" + shm::IndexFile::kFileName, access, nullptr);
    if (!index) return index.error();
    s->index_ = std::move(*index);
    const auto& h = s->index_.header();
    s->who_ = shm::FileIdentity{shm::read_fixed(h.data_dir, sizeof h.data_dir),
                                shm::read_fixed(h.network, sizeof h.network)};
    s->prefix_v4_ = h.block_prefix_v4;
    s->prefix_v6_ = h.block_prefix_v6;
    s->epoch_ = h.epoch;
    s->journal_ = std::make_unique<shm::Journal>(s->who_.data_dir + "/" + s->who_.network,
                                                 shm::SyncMode::kFdatasync);
    s->journal_->set_names_durable_word(&s->index_.header().journal_names_durable);
    s->journal_->set_epoch(s->epoch_);
    s->self_ = shm::current_process();
    auto boot_id = shm::read_boot_id();  // stamps the records an operator's release journals
    if (!boot_id) return boot_id.error();
    s->boot_id_ = *boot_id;
    s->tool_ = true;
    return s;
}

Expected<shm::BlockFile*> NetworkStore::block_for(const IpAddress& a, bool create,
                                                  const shm::BlockFile::Prefill& prefill) {
    const IpAddress base = block_base(a);
    const auto key = std::make_pair(int(base.family), base.value);
    if (auto it = blocks_.find(key); it != blocks_.end()) return it->second.get();
    const int prefix = block_prefix(a.family);
    const std::string name = block_file_name(base, prefix, epoch_);
    shm::BlockGeometry g;
    g.family = uint8_t(a.family);
    g.prefix = uint8_t(prefix);
    g.base = base.to_bytes();
    Expected<shm::BlockFile> b = [&]() -> Expected<shm::BlockFile> {
        if (create) return shm::BlockFile::open_or_create(dir_, name, g, who_, prefill);
        const std::string path = dir_ + "/" + name;
        if (!shm::file_exists(path)) return make_error(Code::kOk, "absent");
        auto opened = shm::BlockFile::open_existing(path, access_, &who_);
        if (opened && opened->geometry().base != g.base) {
            return make_error(Code::kArenaForeign, "block file holds another block: " + path);
        }
        return opened;
    }();
    if (!b) {
        if (b.error().code == Code::kOk) return static_cast<shm::BlockFile*>(nullptr);
        const Code c = b.error().code;
        const bool damaged =
            c == Code::kArenaDamaged || c == Code::kArenaVersion || c == Code::kArenaForeign;
        // A block of this index that cannot be trusted: never repaired in place under others.
        if (damaged && access_ == shm::Access::kReadWrite && !tool_) return retire(b.error().msg);
        return b.error();
    }
    auto owned = std::make_unique<shm::BlockFile>(std::move(*b));
    shm::BlockFile* raw = owned.get();
    blocks_.emplace(key, std::move(owned));
    return raw;
}

Expected<std::vector<shm::BlockFile*>> NetworkStore::all_blocks() {
    std::vector<std::string> names;
    char mine[32];
    std::snprintf(mine, sizeof mine, ".%016llx.blk", (unsigned long long)epoch_);
    const std::string_view suffix = mine;
    const int error = base::for_each_entry(dir_, [&](std::string_view n) {
        // Only this index's blocks (others are of an earlier or a losing index).
        if (n.size() > suffix.size() && n[0] != '.' && n.ends_with(suffix)) names.emplace_back(n);
    });
    if (error != 0) return make_error(Code::kIo, "cannot read directory " + dir_);
    std::sort(names.begin(), names.end());
    std::vector<shm::BlockFile*> out;
    for (const auto& n : names) {
        auto b = shm::BlockFile::open_existing(dir_ + "/" + n, access_, &who_);
        if (!b) return b.error();
        const auto g = b->geometry();
        const IpAddress base = IpAddress::from_bytes(Family(g.family), g.base);
        const auto key = std::make_pair(int(base.family), base.value);
        auto it = blocks_.find(key);
        if (it == blocks_.end()) {
            it = blocks_.emplace(key, std::make_unique<shm::BlockFile>(std::move(*b))).first;
        }
        out.push_back(it->second.get());
    }
    std::sort(out.begin(), out.end(), [](shm::BlockFile* x, shm::BlockFile* y) {
        auto gx = x->geometry(), gy = y->geometry();
        return std::make_pair(gx.family, gx.base) < std::make_pair(gy.family, gy.base);
    });
    return out;
}

}  // namespace shmipam::engine
