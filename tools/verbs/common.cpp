// What shmipamctl's verbs share: finding and opening networks, and saying what cannot be read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/directory.h"
#include "base/write_all.h"
#include "engine/state/replace_file.h"
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

namespace {

bool one_component(const std::string& n) {
    return !n.empty() && n.find('/') == std::string::npos && n[0] != '.';
}

}  // namespace

void add_network_argument(CLI::App& verb, CommonOptions& common, bool required) {
    auto* argument =
        verb.add_option("network", common.network,
                        "network name; pool/<name> or subnet/<name> for a pool mode state");
    if (required) argument->required();
}

void add_json_flag(CLI::App& verb, CommonOptions& common) {
    verb.add_flag("--json", common.json, "print JSON");
}

bool valid_network_name(const std::string& n) {
    for (const char* kind : {"pool/", "subnet/"}) {
        if (n.rfind(kind, 0) == 0) return one_component(n.substr(std::strlen(kind)));
    }
    return one_component(n);
}

Expected<std::string> read_input(const std::string& path) {
    std::stringstream ss;
    if (path == "-") {
        ss << std::cin.rdbuf();
    } else {
        std::ifstream f(path);
        if (!f) return make_error(Code::kIo, "cannot read " + path);
        ss << f.rdbuf();
    }
    return ss.str();
}

std::string state_dir_of(const std::string& run_dir, const std::string& network) {
    // Pool mode's states (docs/pools.md): pool/<name> and subnet/<name>.
    if (network.rfind("pool/", 0) == 0) return run_dir + "/_pools/ippool_" + network.substr(5);
    if (network.rfind("subnet/", 0) == 0) {
        return run_dir + "/_pools/subnet_" + network.substr(7);
    }
    return run_dir + "/" + network;
}

Expected<std::unique_ptr<engine::NetworkStore>> open_network(const std::string& run_dir,
                                                             const std::string& network,
                                                             shm::Access a) {
    if (!valid_network_name(network)) {
        return make_error(Code::kInvalidConfig, "invalid network name \"" + network + "\"");
    }
    const std::string dir = state_dir_of(run_dir, network);
    if (::access(dir.c_str(), F_OK) != 0) {
        return make_error(Code::kIo, "no network \"" + network + "\" under " + run_dir);
    }
    return engine::NetworkStore::open_existing(dir, a);
}

std::vector<std::string> networks_under(const std::string& run_dir, std::string* error_out) {
    std::vector<std::string> out;
    const int error = base::for_each_entry(run_dir, [&](std::string_view name) {
        const std::string n(name);
        if (!valid_network_name(n)) return;
        if (::access((run_dir + "/" + n + "/" + shm::IndexFile::kFileName).c_str(), F_OK) == 0) {
            out.push_back(n);
        }
    });
    if (error != 0) {
        *error_out = "cannot read " + run_dir + ": " + std::strerror(error);
        return out;
    }
    // Pool mode's states, as pool/<name> and subnet/<name>.
    base::for_each_entry(run_dir + "/_pools", [&](std::string_view name) {
        const std::string n(name);
        const std::string index = run_dir + "/_pools/" + n + "/" + shm::IndexFile::kFileName;
        if (::access(index.c_str(), F_OK) != 0) return;
        if (n.starts_with("ippool_")) out.push_back("pool/" + n.substr(7));
        if (n.starts_with("subnet_")) out.push_back("subnet/" + n.substr(7));
    });
    std::sort(out.begin(), out.end());
    return out;
}

int report_released(bool json, bool apply,
                    const Expected<std::vector<engine::ReleasedAttachment>>& r) {
    if (!r) return cannot_read(r.error());
    std::cout << (json ? json_text(released_json(*r, apply)) : released_text(*r, apply));
    return apply || r->empty() ? kExitClean : kExitViolations;
}

// node_exporter's textfile collector reads *.prom: written aside, renamed into place, so that
// it never reads half a file.
Status write_textfile(const std::string& dir, const std::string& name, const std::string& text) {
    return engine::replace_file(dir + "/" + name, text, engine::Replace::kWhole);
}

Status replace_file_atomically(const std::string& dir, const std::string& name,
                               const std::string& bytes, unsigned mode) {
    std::string tmp = dir + "/." + name + ".tmp.XXXXXX";
    const std::string path = dir + "/" + name;
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return make_error(Code::kIo, "cannot create " + tmp + ": " + std::strerror(errno));
    const bool ok = write_all(fd, bytes) && ::fchmod(fd, mode_t(mode)) == 0 && ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = ok ? errno : err;
        ::unlink(tmp.c_str());
        return make_error(Code::kIo, "cannot write " + path + ": " + std::strerror(e));
    }
    const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        ::fsync(d);
        ::close(d);
    }
    return Ok{};
}

}  // namespace shmipam::tools
