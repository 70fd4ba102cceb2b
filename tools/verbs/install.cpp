// shmipamctl install: what a CNI plugin's install container does on each node (deploy/): the
// plugin binaries (the plugin and its helpers, with the helpers' shared libraries in
// shmipam-lib/ beside them) copied into the CNI bin directory, each by a rename so that a
// runtime exec'ing the plugin meanwhile runs the old file or the new one, never half of one;
// the network's conflist written into the CNI conf directory unless one of that name is there.
// What it wrote is recorded, with each file's SHA-256, in a manifest beside the conflist
// (install_manifest.h), which shmipamctl uninstall (uninstall.cpp) removes by.
//
// A binary is replaced only when the installed one is older or unversioned: a node where a newer
// shmipam was installed (a rollback of the DaemonSet, two DaemonSets) keeps it, and the install
// says so and exits 1 unless --force.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/build_version.h"
#include "base/sha256.h"
#include "base/write_all.h"
#include "cluster/node_name.h"
#include "tools/verbs/install_manifest.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

struct InstallOptions {
    std::string from;  // where the binaries are (default: beside shmipamctl)
    std::string cni_bin_dir, cni_conf_dir, conf;
    bool force = false;           // replace a newer plugin
    bool overwrite_conf = false;  // replace a conflist that differs
    // The node's name as its Node object has it (the DaemonSet passes spec.nodeName), written
    // to node_name_file for cluster mode (ipam.nodeNameFile).
    std::string node_name, node_name_file = "/var/lib/shmipam/nodename";
};

// The binaries a node needs, found beside shmipamctl (or in --from), in the order they are put
// in place: the helpers before the plugin, so that a new plugin never runs beside an old
// helper (whose protocol version it would not speak: cluster/helper_protocol.h,
// kube/pod_protocol.h). A helper is installed when it is there (a build without it serves
// single-node and pool mode without the API).
struct Binary {
    const char* name;
    bool required;
};
constexpr Binary kBinaries[] = {
    {"shmipam-cluster", false}, {"shmipam-kube", false}, {"shmipam", true}};
constexpr const char* kHelpers[] = {"shmipam-cluster", "shmipam-kube"};

// The helpers are dynamic (libcurl): the image ships the shared libraries they load in this
// directory beside them, their C library and its loader too (base/shipped_libraries.h), and
// install copies it beside them on the host, so that they run with the libraries they were
// built with and need nothing of the host's C library.
constexpr const char* kLibDir = kInstallLibDir;

std::string self_dir() {
    char self[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    const std::string path = n > 0 ? std::string(self, size_t(n)) : std::string();
    return path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
}

std::optional<std::string> read_whole(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

// A conflist (or a single-plugin conf) whose IPAM is shmipam somewhere: what an operator means
// to install. Anything else is refused before the directory is touched.
std::optional<std::string> conf_problem(const std::string& text) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return "is not a JSON object";
    if (!j.contains("name") || !j["name"].is_string()) return "has no \"name\"";
    const nlohmann::json plugins =
        j.contains("plugins") ? j["plugins"] : nlohmann::json::array({j});
    if (!plugins.is_array()) return "has \"plugins\" that is not a list";
    for (const auto& p : plugins) {
        if (p.is_object() && p.contains("ipam") && p["ipam"].is_object() &&
            p["ipam"].value("type", "") == "shmipam") {
            return std::nullopt;
        }
    }
    return "has no plugin whose ipam type is \"shmipam\"";
}

// Records what this install left of shmipam's on the node (install_manifest.h), for uninstall:
// every binary and library of ours in the bin directory as it is now (a newer one kept is
// recorded too: it is shmipam's), and the conflist with the hash of what install writes (a
// conflist of that name that differs, left as it is, is then kept by uninstall unless forced).
// An entry of the previous manifest that this install does not write (the conflist of an
// earlier install with --conf, this one without) is kept while its file is there. Written
// atomically, after everything else.
Status write_manifest(const InstallOptions& o, const std::optional<std::string>& conf_name,
                      const std::string& conf, const std::optional<BuildVersion>& version) {
    InstallManifest m;
    m.version = version ? version->text : "";
    for (const char* b : kInstalledBinaries) {
        if (auto bytes = read_whole(o.cni_bin_dir + "/" + b)) {
            m.files.push_back({"bin", b, base::sha256_hex(*bytes)});
        }
    }
    std::error_code ec;
    const std::string lib_dir = o.cni_bin_dir + "/" + kLibDir;
    std::vector<std::string> libs;
    for (const auto& e : std::filesystem::directory_iterator(lib_dir, ec)) {
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') {
            libs.push_back(e.path().filename().string());
        }
    }
    std::sort(libs.begin(), libs.end());
    for (const auto& l : libs) {
        if (auto bytes = read_whole(lib_dir + "/" + l)) {
            m.files.push_back({"bin", std::string(kLibDir) + "/" + l, base::sha256_hex(*bytes)});
        }
    }
    if (conf_name) m.files.push_back({"conf", *conf_name, base::sha256_hex(conf)});
    if (auto old = read_whole(manifest_path(o.cni_conf_dir))) {
        std::string why;
        if (auto prev = parse_manifest(*old, &why)) {
            for (const auto& e : prev->files) {
                bool listed = false;
                for (const auto& n : m.files)
                    listed = listed || (n.dir == e.dir && n.path == e.path);
                const std::string dir = e.dir == "bin" ? o.cni_bin_dir : o.cni_conf_dir;
                if (!listed && ::access((dir + "/" + e.path).c_str(), F_OK) == 0) {
                    m.files.push_back(e);
                }
            }
        }
    }
    const std::string dir = o.cni_conf_dir + "/" + kManifestDir;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return make_error(Code::kIo, "cannot create " + dir + ": " + std::strerror(errno));
    }
    return replace_file_atomically(dir, kManifestName, manifest_json(m), 0644);
}

int cmd_install(const InstallOptions& o) {
    if (o.cni_bin_dir.empty() || o.cni_conf_dir.empty()) {
        return cannot_read("install needs --cni-bin-dir and --cni-conf-dir");
    }
    const std::string from = o.from.empty() ? self_dir() : o.from;
    // The plugin refuses, in cluster mode, a name no Node object can have: refused here first.
    if (auto why = cluster::node_name_problem(o.node_name); !o.node_name.empty() && !why.empty()) {
        return cannot_read("--node-name: " + why);
    }
    // Everything read and checked first: a bad conf or a missing binary changes nothing.
    std::optional<std::string> conf;
    std::string conf_name;
    if (!o.conf.empty()) {
        conf = read_whole(o.conf);
        if (!conf) return cannot_read("cannot read " + o.conf + ": " + std::strerror(errno));
        if (auto why = conf_problem(*conf)) return cannot_read(o.conf + " " + *why);
        conf_name = o.conf.substr(o.conf.rfind('/') + 1);
    }
    // One installer at a time per bin directory (two DaemonSets, a DaemonSet and a host
    // install): each compares versions and renames with nobody changing the files meanwhile.
    auto lock = lock_bin_dir(o.cni_bin_dir);
    if (!lock) return cannot_read(lock.error());
    struct Planned {
        std::string name, bytes;
        std::optional<BuildVersion> installed;
        bool same = false;
    };
    std::vector<Planned> plan;
    bool refused = false, helper_refused = false;
    std::optional<BuildVersion> plugin_version;
    for (const Binary& b : kBinaries) {
        auto bytes = read_whole(from + "/" + b.name);
        if (!bytes) {
            if (b.required) return cannot_read("no " + std::string(b.name) + " in " + from);
            continue;
        }
        Planned p{b.name, std::move(*bytes), std::nullopt, false};
        if (std::string(b.name) == "shmipam") plugin_version = find_build_version(p.bytes);
        if (auto there = read_whole(o.cni_bin_dir + "/" + b.name)) {
            p.same = *there == p.bytes;
            p.installed = find_build_version(*there);
            const auto ours = find_build_version(p.bytes);
            if (!p.same && p.installed && ours && *ours < *p.installed && !o.force) {
                std::cerr << "shmipamctl install: " << o.cni_bin_dir << "/" << b.name
                          << " is version " << p.installed->text << ", newer than this "
                          << ours->text << "; left as it is (--force replaces it)\n";
                refused = true;
                helper_refused = helper_refused || std::string(b.name) != "shmipam";
                continue;
            }
        }
        plan.push_back(std::move(p));
    }
    // The helpers' libraries, read before anything changes too. Left as they are beside a
    // newer helper that was kept (they are its libraries).
    std::vector<std::pair<std::string, std::string>> libs;
    const std::string lib_from = from + "/" + kLibDir, lib_to = o.cni_bin_dir + "/" + kLibDir;
    const bool ship_libs = std::filesystem::is_directory(lib_from) && !helper_refused;
    if (ship_libs) {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(lib_from, ec)) {
            if (!e.is_regular_file()) continue;
            auto bytes = read_whole(e.path().string());
            if (!bytes) return cannot_read("cannot read " + e.path().string());
            libs.emplace_back(e.path().filename().string(), std::move(*bytes));
        }
        if (ec) return cannot_read("cannot read " + lib_from + ": " + ec.message());
        struct stat st {};
        if (::lstat(lib_to.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
            return cannot_read(lib_to + " is there and is not a directory");
        }
        if (::mkdir(lib_to.c_str(), 0755) != 0 && errno != EEXIST) {
            return cannot_read("cannot create " + lib_to + ": " + std::strerror(errno));
        }
        // Before the helpers: a new helper never runs without its libraries. An old helper
        // exec'd meanwhile gets libraries of the same sonames (the same ABI).
        size_t unchanged = 0;
        for (const auto& [name, bytes] : libs) {
            // The loader is exec'd (the plugin starts each helper through it); the libraries
            // are only mapped.
            const mode_t mode = name == kShippedLoader ? 0755 : 0644;
            struct stat there_st {};
            if (auto there = read_whole(lib_to + "/" + name);
                there && *there == bytes && ::stat((lib_to + "/" + name).c_str(), &there_st) == 0 &&
                (there_st.st_mode & 07777) == mode) {
                ++unchanged;
                continue;
            }
            if (auto st2 = replace_file_atomically(lib_to, name, bytes, mode); !st2) {
                return cannot_read(st2.error());
            }
        }
        std::cout << (unchanged == libs.size() ? "unchanged " : "installed ") << lib_to << " ("
                  << libs.size() << " libraries, " << libs.size() - unchanged << " written)\n";
    }
    for (const Planned& p : plan) {
        if (p.same) {
            std::cout << "unchanged " << o.cni_bin_dir << "/" << p.name << "\n";
            continue;
        }
        if (auto st = replace_file_atomically(o.cni_bin_dir, p.name, p.bytes, 0755); !st) {
            return cannot_read(st.error());
        }
        std::cout << "installed " << o.cni_bin_dir << "/" << p.name << " ("
                  << (p.installed ? "was " + p.installed->text : std::string("new")) << ")\n";
    }
    // Libraries an earlier release shipped and this one does not, once every helper that
    // could load them is replaced (a process that mapped one keeps it).
    if (ship_libs) {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(lib_to, ec)) {
            const std::string name = e.path().filename().string();
            bool ours = false;
            for (const auto& l : libs) ours = ours || l.first == name;
            if (!ours && !e.is_directory()) {
                std::filesystem::remove(e.path(), ec);
                std::cout << "removed " << e.path().string() << " (no longer shipped)\n";
            }
        }
    }
    // A helper left from another release beside this plugin (a --from without it): the
    // plugin's requests carry a protocol version the helper refuses when it is not its own.
    for (const char* helper : kHelpers) {
        if (::access((from + "/" + helper).c_str(), F_OK) == 0 || !plugin_version) continue;
        if (auto there = read_whole(o.cni_bin_dir + "/" + helper)) {
            const auto v = find_build_version(*there);
            if (!v || v->text != plugin_version->text) {
                std::cerr << "shmipamctl install: " << o.cni_bin_dir << "/" << helper
                          << " is version " << (v ? v->text : "unknown") << ", the plugin "
                          << plugin_version->text
                          << ": install the helper of the same build beside it\n";
            }
        }
    }
    if (conf) {
        const std::string path = o.cni_conf_dir + "/" + conf_name;
        auto there = read_whole(path);
        if (there && *there != *conf && !o.overwrite_conf) {
            // The operator's (or an earlier release's) conflist: theirs to change.
            std::cout << "left " << path
                      << " as it is (it differs; --overwrite-conf replaces it)\n";
        } else if (there && *there == *conf) {
            std::cout << "unchanged " << path << "\n";
        } else {
            if (auto st = replace_file_atomically(o.cni_conf_dir, conf_name, *conf, 0644); !st) {
                return cannot_read(st.error());
            }
            std::cout << "wrote " << path << "\n";
        }
    }
    if (auto st = write_manifest(o, conf ? std::optional<std::string>(conf_name) : std::nullopt,
                                 conf ? *conf : std::string(), plugin_version);
        !st) {
        return cannot_read(st.error());
    }
    if (!o.node_name.empty()) {
        const std::string dir = o.node_name_file.substr(0, o.node_name_file.rfind('/'));
        const std::string name = o.node_name_file.substr(o.node_name_file.rfind('/') + 1);
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (auto st = replace_file_atomically(dir, name, o.node_name + "\n", 0644); !st) {
            return cannot_read(st.error());
        }
        std::cout << "wrote " << o.node_name_file << " (node " << o.node_name << ")\n";
    }
    return refused ? kExitViolations : kExitClean;
}

}  // namespace

// install reads none of the common options: it works on the CNI directories, not on state.
void register_install(CLI::App& app, CommonOptions&, int& exit_code) {
    auto* verb = app.add_subcommand(
        "install",
        "copy the plugin, its helpers and their libraries (shmipam-lib/) into the CNI bin "
        "directory (each by a rename; a newer one there is kept) and write a conflist unless "
        "one of its name is there");
    auto o = std::make_shared<InstallOptions>();
    verb->add_option("--cni-bin-dir", o->cni_bin_dir, "e.g. /opt/cni/bin")->required();
    verb->add_option("--cni-conf-dir", o->cni_conf_dir, "e.g. /etc/cni/net.d")->required();
    verb->add_option("--conf", o->conf, "the conflist to install (its file name kept)");
    verb->add_option("--node-name", o->node_name,
                     "this node's name as its Node object has it (spec.nodeName), written for "
                     "cluster mode");
    verb->add_option("--node-name-file", o->node_name_file,
                     "where --node-name is written (the plugin's ipam.nodeNameFile)")
        ->capture_default_str();
    verb->add_option("--from", o->from,
                     "where shmipam, its helpers (shmipam-cluster, shmipam-kube) and their "
                     "libraries (shmipam-lib/) are (default: beside shmipamctl)");
    verb->add_flag("--force", o->force, "replace a newer plugin (a downgrade)");
    verb->add_flag("--overwrite-conf", o->overwrite_conf,
                   "replace a conflist of the same name that differs");
    verb->callback([o, &exit_code] { exit_code = cmd_install(*o); });
}

}  // namespace shmipam::tools
