#include "engine/recovery/migration.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/directory.h"
#include "engine/addr/fingerprint.h"
#include "engine/policy/next_fit.h"
#include "engine/recovery/aside_builder.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"
#include "shm/file_system.h"

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
    shm::FileSystem& fs = shm::file_system();
    const int fd = fs.open(path, O_RDONLY | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat sb {};
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fs.close(fd);
        return false;
    }
    char buf[1024];
    const ssize_t n = fs.pread(fd, buf, sizeof buf, 0);
    fs.close(fd);
    if (n < 0) return false;
    out->assign(buf, size_t(n));
    if (mtime_ns)
        *mtime_ns = uint64_t(sb.st_mtim.tv_sec) * 1'000'000'000u + uint64_t(sb.st_mtim.tv_nsec);
    return true;
}

}  // namespace

Status import_host_local(const NetworkConfig& cfg, shm::IndexFile& aside,
                         const BlockOpener& open_block, const std::array<uint8_t, 16>& boot_id,
                         std::vector<format::JournalRecord>* imported) {
    const std::string dir = cfg.host_local_dir();
    std::vector<std::string> names;
    if (base::for_each_entry(dir, [&](std::string_view n) { names.emplace_back(n); }) != 0) {
        return Ok{};  // nothing to import
    }

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

    AsideBuilder builder(aside, cfg.range_sets.size());
    for (const auto& [key, files] : attachments) {
        const Fingerprint fp = fingerprint(key.first, key.second);
        const AttachmentText text{key.first, key.second, "", format::kEntryFlagImported,
                                  files.front().mtime_ns};
        auto e = builder.add_entry(fp, text);
        if (!e) return e.error();
        std::vector<bool> set_used(cfg.range_sets.size());
        for (const HostLocalFile& f : files) {
            if (f.range_set >= format::kMaxRangeSets || set_used[f.range_set]) continue;
            set_used[f.range_set] = true;  // two files for one set: keep the first
            const uint8_t prefix =
                f.address.family == Family::kV4 ? cfg.block_prefix_v4 : cfg.block_prefix_v6;
            builder.add_address(*e, f.range_set, f.address, prefix, 0, fp.fp1, f.mtime_ns);
            if (imported != nullptr) {
                imported->push_back(make_record(format::JournalOp::kAlloc, f.address, prefix,
                                                f.range_set, 1, fp, text, boot_id, f.mtime_ns));
            }
        }
    }
    if (auto st = builder.build_blocks(open_block); !st) return st;
    return Ok{};
}

}  // namespace shmipam::engine
