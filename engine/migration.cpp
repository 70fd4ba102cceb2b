#include "engine/migration.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/attachment_index.h"
#include "engine/fingerprint.h"
#include "engine/next_fit.h"
#include "engine/slot_ops.h"
#include "shm/atomic_word.h"
#include "shm/state_words.h"

namespace shmipam::engine {

using format::EntryState;
using format::SlotState;

namespace {

struct HostLocalFile {
    IpAddress address;
    size_t range_set = 0;
    uint64_t mtime_ns = 0;
};

std::string trim(std::string s) {
    const char* ws = " \t\r\n";
    s.erase(0, s.find_first_not_of(ws));
    const size_t end = s.find_last_not_of(ws);
    s.erase(end == std::string::npos ? 0 : end + 1);
    return s;
}

bool read_small_file(const std::string& path, std::string* out, uint64_t* mtime_ns) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat sb {};
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ::close(fd);
        return false;
    }
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n < 0) return false;
    out->assign(buf, size_t(n));
    if (mtime_ns)
        *mtime_ns = uint64_t(sb.st_mtim.tv_sec) * 1'000'000'000u + uint64_t(sb.st_mtim.tv_nsec);
    return true;
}

void copy_truncated(char* dst, size_t cap, const std::string& s) {
    std::memset(dst, 0, cap);
    std::memcpy(dst, s.data(), std::min(s.size(), cap - 1));
}

}  // namespace

Status import_host_local(const NetworkConfig& cfg, shm::IndexFile& aside,
                         const BlockOpener& open_block) {
    const std::string dir = cfg.host_local_dir();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Ok{};  // nothing to import
    std::vector<std::string> names;
    while (dirent* ent = ::readdir(d)) names.emplace_back(ent->d_name);
    ::closedir(d);

    // (containerID, ifname) -> its addresses; std::map keeps the import order deterministic.
    std::map<std::pair<std::string, std::string>, std::vector<HostLocalFile>> attachments;
    for (const std::string& name : names) {
        const std::string path = dir + "/" + name;
        if (name.rfind("last_reserved_ip.", 0) == 0) {
            const std::string n = name.substr(std::strlen("last_reserved_ip."));
            std::string body;
            if (n.empty() || n.size() > 2 ||
                n.find_first_not_of("0123456789") != std::string::npos ||
                !read_small_file(path, &body, nullptr)) {
                continue;
            }
            const size_t set = size_t(std::stoul(n));
            auto last = IpAddress::parse(trim(body));
            if (set < cfg.range_sets.size() && set < format::kMaxRangeSets && last) {
                aside.header().cursor[set] = cursor_after(cfg.range_sets[set], *last);
            }
            continue;
        }
        auto addr = IpAddress::parse(name);
        if (!addr) continue;
        std::string body;
        uint64_t mtime = 0;
        if (!read_small_file(path, &body, &mtime)) continue;
        const size_t br = body.find('\n');
        std::string cid = trim(body.substr(0, br));
        std::string ifname = br == std::string::npos ? "" : trim(body.substr(br + 1));
        if (cid.empty()) continue;
        // Files from host-local before it recorded interfaces hold only the container id; the
        // runtime's DEL for them comes with the pod's (conventional) eth0.
        if (ifname.empty()) ifname = "eth0";
        for (size_t s = 0; s < cfg.range_sets.size(); ++s) {
            if (range_index_for(cfg.range_sets[s], *addr)) {
                attachments[{cid, ifname}].push_back({*addr, s, mtime});
                break;
            }
        }
    }

    // Place the entries in the aside index, and note what each block must hold.
    struct SlotFill {
        uint64_t slot;
        uint64_t entry;
        uint16_t tenancy;
        uint64_t owner;
        uint64_t fp1;
        uint64_t mtime_ns;
    };
    std::map<std::pair<int, u128>, std::pair<IpAddress, std::vector<SlotFill>>> blocks;
    const uint64_t mask = aside.entry_count() - 1;
    for (const auto& [key, files] : attachments) {
        const Fingerprint fp = fingerprint(key.first, key.second);
        uint64_t e = fp.fp1 & mask;
        uint64_t d = 0;
        while (shm::EntryWord::decode(aside.entry(e).state).state != EntryState::kEmpty) {
            if (++d > mask) return make_error(Code::kIndexFull, "too many host-local allocations");
            e = (e + 1) & mask;
        }
        shm::fetch_max_word(aside.header().max_probe, d);
        format::Entry& ent = aside.entry(e);
        const uint64_t word = shm::EntryWord::next(0, EntryState::kClaiming, fp.fp16());
        const uint64_t committed = shm::EntryWord::next(word, EntryState::kCommitted, fp.fp16());
        const uint16_t tenancy = shm::EntryWord::decode(committed).gen;
        ent.fp2 = fp.fp2;
        ent.fp1 = AttachmentIndex::stamped_fp1(committed, fp);
        ent.created_unix_ns = files.front().mtime_ns;
        ent.flags = format::kEntryFlagImported;
        copy_truncated(ent.container_id, sizeof ent.container_id, key.first);
        copy_truncated(ent.ifname, sizeof ent.ifname, key.second);
        ent.ref_count = uint8_t(std::min(cfg.range_sets.size(), format::kMaxRangeSets));
        for (const HostLocalFile& f : files) {
            if (f.range_set >= format::kMaxRangeSets) continue;
            format::AddressRef& ref = ent.refs[f.range_set];
            if (ref.family != 0) continue;  // two files for one set: keep the first
            auto bytes = f.address.to_bytes();
            std::copy(bytes.begin(), bytes.end(), ref.address);
            ref.family = uint8_t(f.address.family);
            ref.block_prefix = uint8_t(f.address.family == Family::kV4 ? cfg.block_prefix_v4
                                                                       : cfg.block_prefix_v6);
            ref.range_set = uint8_t(f.range_set);
            const u128 host_mask = (u128{1} << (f.address.bits() - ref.block_prefix)) - 1;
            const IpAddress base{f.address.value & ~host_mask, f.address.family};
            auto& blk = blocks[{int(base.family), base.value}];
            blk.first = base;
            blk.second.push_back({uint64_t(f.address.value & host_mask), e, tenancy,
                                  slot_ops::owner_word(e, f.range_set, tenancy), fp.fp1,
                                  f.mtime_ns});
        }
        ent.state = committed;
    }

    // Build each block aside with its imported slots allocated. A block that already exists was
    // published by an earlier importer of the same files (one that died before publishing the
    // index): it holds the same slots.
    for (const auto& [key, blk] : blocks) {
        const auto& fills = blk.second;
        auto made = open_block(blk.first, [&fills](shm::BlockFile& b) -> Status {
            for (const SlotFill& f : fills) {
                format::Slot& s = b.slot(f.slot);
                s.owner = f.owner;
                s.owner_fp = f.fp1;
                s.allocated_unix_ns = f.mtime_ns;
                s.state = shm::SlotWord::allocated(s.state, f.entry, f.tenancy);
                slot_ops::sync_hint(b, f.slot);
            }
            return Ok{};
        });
        if (!made) return made.error();
    }
    return Ok{};
}

}  // namespace shmipam::engine
