#include "ipam/pool_catalog.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "engine/addr/fingerprint.h"
#include "engine/state/replace_file.h"
#include "pools/catalog_codec.h"
#include "pools/pool_dir.h"

namespace shmipam::ipam {

namespace {

std::string snapshot_path(const Request& r) {
    uint64_t h = engine::fingerprint(r.pools->pools_dir, "").fp1;
    std::string path = r.network.run_dir + "/_pools/catalog-0123456789abcdef";
    for (size_t i = path.size(); i-- > path.size() - 16; h >>= 4)
        path[i] = "0123456789abcdef"[h & 15];
    return path;
}

// The snapshot's bytes, mapped read-only: one page fault maps the pages (the kernel maps the
// neighbours of a faulting page of a cached file too), where reading them into the heap faults
// in every page it fills (35 µs more at 100 pools, measured per call phase). A snapshot is
// replaced by rename, never written in place, so a mapping never changes under us.
// The descriptor stays open with the mapping: the plugin keeps the catalog until it exits
// (Invocation::keep_until_exit), so closing it would be one more system call for nothing.
struct SnapshotBytes {
    int fd = -1;
    void* addr = MAP_FAILED;
    size_t size = 0;
    ~SnapshotBytes() {
        if (addr != MAP_FAILED) ::munmap(addr, size);
        if (fd >= 0) ::close(fd);
    }
    std::string_view bytes() const { return {static_cast<const char*>(addr), size}; }
};

std::shared_ptr<SnapshotBytes> map_file(const std::string& path) {
    auto m = std::make_shared<SnapshotBytes>();
    m->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) return nullptr;
    struct stat st {};
    if (::fstat(m->fd, &st) == 0 && st.st_size > 0) {
        m->size = size_t(st.st_size);
        m->addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, m->fd, 0);
    }
    return m->addr != MAP_FAILED ? m : nullptr;
}

// Snapshot file: u32 stamp size, the stamp, the encoded catalog. Used when its stamp still
// holds for the directory.
std::optional<pools::Catalog> from_snapshot(const std::string& path, const std::string& dir) {
    auto m = map_file(path);
    if (m == nullptr) return std::nullopt;
    const std::string_view bytes = m->bytes();
    uint32_t n = 0;
    if (bytes.size() < sizeof n) return std::nullopt;
    std::memcpy(&n, bytes.data(), sizeof n);
    if (bytes.size() - sizeof n < n || !pools::stamp_holds(dir, bytes.substr(sizeof n, n))) {
        return std::nullopt;
    }
    return pools::decode_catalog(bytes.substr(sizeof n + n), m);
}

// Written aside and renamed over: a reader sees the old snapshot or the new one, whole.
void write_snapshot(const std::string& path, const std::string& stamp,
                    const pools::Catalog& catalog) {
    const std::string dir = path.substr(0, path.rfind('/'));
    ::mkdir(dir.substr(0, dir.rfind('/')).c_str(), 0755);
    ::mkdir(dir.c_str(), 0755);
    const uint32_t n = uint32_t(stamp.size());
    std::string bytes(reinterpret_cast<const char*>(&n), sizeof n);
    bytes += stamp;
    bytes += pools::encode_catalog(catalog);
    // A snapshot lost is compiled again from the pools directory by the next ADD.
    (void)engine::replace_file(path, bytes, engine::Replace::kWhole);
}

}  // namespace

Expected<std::shared_ptr<const pools::Catalog>> load_catalog(const Request& r) {
    const std::string& dir = r.pools->pools_dir;
    const std::string path = snapshot_path(r);
    if (auto c = from_snapshot(path, dir)) {
        return std::shared_ptr<const pools::Catalog>(
            std::make_shared<pools::Catalog>(std::move(*c)));
    }
    bool racy = false;
    auto stamp = pools::directory_stamp(dir, &racy);
    if (!stamp) return stamp.error();
    auto c = pools::load_pools_dir(dir);
    if (!c) return c.error();
    // Only a directory that did not change while it was read, and not within a timestamp tick.
    bool racy_after = false;
    auto after = pools::directory_stamp(dir, &racy_after);
    if (!racy && !racy_after && after && *after == *stamp) write_snapshot(path, *stamp, *c);
    return std::shared_ptr<const pools::Catalog>(std::make_shared<pools::Catalog>(std::move(*c)));
}

}  // namespace shmipam::ipam
