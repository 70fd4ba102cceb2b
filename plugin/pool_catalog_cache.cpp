#include "plugin/pool_catalog_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "engine/addr/fingerprint.h"
#include "pools/catalog_codec.h"
#include "pools/pool_dir.h"

namespace shmipam::cni {

namespace {

std::string snapshot_path(const NetConf& nc) {
    const uint64_t h = engine::fingerprint(nc.pool_mode->pools_dir, "").fp1;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return nc.network.run_dir + "/_pools/catalog-" + hex;
}

// The snapshot's bytes. A small one is read (open, fstat, read, close: about 6 µs here); a
// large one is mapped read-only, so that only the pages the call reads are faulted in (mapping
// and unmapping cost about 20 µs here, less than reading and faulting in 100 KiB of heap). A
// snapshot is replaced by rename, never written in place, so a mapping never changes under us.
constexpr size_t kMapAbove = 64 * 1024;

struct SnapshotBytes {
    void* addr = MAP_FAILED;
    size_t size = 0;
    std::string copy;
    ~SnapshotBytes() {
        if (addr != MAP_FAILED) ::munmap(addr, size);
    }
    std::string_view bytes() const {
        return addr != MAP_FAILED ? std::string_view{static_cast<const char*>(addr), size}
                                  : std::string_view{copy};
    }
};

std::shared_ptr<SnapshotBytes> map_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    auto m = std::make_shared<SnapshotBytes>();
    struct stat st {};
    bool ok = false;
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
        m->size = size_t(st.st_size);
        if (m->size > kMapAbove) {
            m->addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
            ok = m->addr != MAP_FAILED;
        } else {
            m->copy.resize(m->size);
            size_t got = 0;
            while (got < m->size) {
                const ssize_t n = ::read(fd, m->copy.data() + got, m->size - got);
                if (n <= 0) break;
                got += size_t(n);
            }
            ok = got == m->size;
        }
    }
    ::close(fd);
    return ok ? m : nullptr;
}

// Snapshot file: u32 stamp size, the stamp, the encoded catalog.
std::optional<pools::Catalog> from_snapshot(const std::string& path, const std::string& stamp) {
    auto m = map_file(path);
    if (m == nullptr) return std::nullopt;
    const std::string_view bytes = m->bytes();
    uint32_t n = 0;
    if (bytes.size() < sizeof n) return std::nullopt;
    std::memcpy(&n, bytes.data(), sizeof n);
    if (bytes.size() - sizeof n < n || bytes.substr(sizeof n, n) != stamp) return std::nullopt;
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
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const bool whole = ::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size());
    ::close(fd);
    if (!whole || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

Expected<std::shared_ptr<const pools::Catalog>> load_catalog(const NetConf& nc) {
    const std::string& dir = nc.pool_mode->pools_dir;
    bool racy = false;
    auto stamp = pools::directory_stamp(dir, &racy);
    if (!stamp) return stamp.error();
    const std::string path = snapshot_path(nc);
    if (auto c = from_snapshot(path, *stamp)) {
        return std::shared_ptr<const pools::Catalog>(
            std::make_shared<pools::Catalog>(std::move(*c)));
    }
    auto c = pools::load_pools_dir(dir);
    if (!c) return c.error();
    // Only a directory that did not change while it was read, and not within a timestamp tick.
    bool racy_after = false;
    auto after = pools::directory_stamp(dir, &racy_after);
    if (!racy && !racy_after && after && *after == *stamp) write_snapshot(path, *stamp, *c);
    return std::shared_ptr<const pools::Catalog>(std::make_shared<pools::Catalog>(std::move(*c)));
}

}  // namespace shmipam::cni
