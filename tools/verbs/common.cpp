// What shmipamctl's verbs share: finding and opening networks, and saying what cannot be read.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "tools/render/json.h"
#include "tools/render/released.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cannot_read(const Error& e) {
    std::cerr << "shmipamctl: " << e.msg << (e.details.empty() ? "" : " (" + e.details + ")")
              << "\n";
    return kExitCannotRead;
}

int cannot_read(const std::string& message) {
    std::cerr << "shmipamctl: " << message << "\n";
    return kExitCannotRead;
}

bool valid_network_name(const std::string& n) {
    return !n.empty() && n.find('/') == std::string::npos && n[0] != '.';
}

Expected<std::unique_ptr<engine::NetworkStore>> open_network(const Options& o, shm::Access a) {
    if (!valid_network_name(o.network)) {
        return make_error(Code::kInvalidConfig, "invalid network name \"" + o.network + "\"");
    }
    const std::string dir = o.run_dir + "/" + o.network;
    if (::access(dir.c_str(), F_OK) != 0) {
        return make_error(Code::kIo, "no network \"" + o.network + "\" under " + o.run_dir);
    }
    return engine::NetworkStore::open_existing(dir, a);
}

std::vector<std::string> networks_under(const std::string& run_dir, std::string* error) {
    std::vector<std::string> out;
    DIR* d = ::opendir(run_dir.c_str());
    if (d == nullptr) {
        *error = "cannot read " + run_dir + ": " + std::strerror(errno);
        return out;
    }
    while (dirent* ent = ::readdir(d)) {
        const std::string n = ent->d_name;
        if (!valid_network_name(n)) continue;
        if (::access((run_dir + "/" + n + "/" + shm::IndexFile::kFileName).c_str(), F_OK) == 0) {
            out.push_back(n);
        }
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

int report_released(const Options& o, const Expected<std::vector<engine::ReleasedAttachment>>& r) {
    if (!r) return cannot_read(r.error());
    std::cout << (o.json ? json_text(released_json(*r, o.apply)) : released_text(*r, o.apply));
    return o.apply || r->empty() ? kExitClean : kExitViolations;
}

}  // namespace shmipam::tools
