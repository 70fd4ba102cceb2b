#include "cluster/kv_store.h"

#include <cstdio>

#include "base/unique_id.h"

namespace shmipam::cluster {

// The prefix with its last byte below 0xff incremented, the bytes after it dropped (etcd's
// convention); a prefix of 0xff bytes alone ends at the end of the key space ("\0").
std::string prefix_end(const std::string& prefix) {
    std::string p = prefix;
    while (!p.empty()) {
        if (uint8_t(p.back()) < 0xff) {
            p.back() = char(uint8_t(p.back()) + 1);
            return p;
        }
        p.pop_back();
    }
    return std::string(1, '\0');
}

// base::unique_id (getrandom), not std::random_device: libstdc++'s calls arc4random, which
// needs glibc 2.36 and so keeps the shipped helpers off hosts with an older glibc.
std::string nonce() {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(base::unique_id()));
    return buf;
}

}  // namespace shmipam::cluster
