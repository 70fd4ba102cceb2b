// shmipamctl uninstall: takes off a node what shmipamctl install put there, as its manifest
// (install_manifest.h) records it: the plugin, its helpers, their libraries (shmipam-lib/) and
// the conflist. A file whose hash changed since (an operator's edit of the conflist) is kept
// unless --force (a binary replaced since by another shmipam build, which its build version
// says, is removed all the same). On a node installed before install wrote a manifest, only the
// binaries whose build version it can read (base/build_version.h) are removed, and the rest is
// named.
//
// It refuses while the node holds fixed-address claims (docs/fixed-ips.md: a StatefulSet pod's
// address would go with the plugin) unless --force, and leaves the state (runDir, dataDir)
// alone unless --purge. Everything is read and checked before anything changes: bad input exits
// 2 with nothing touched. The manifest is removed last, and only once every file it lists is
// gone: a run killed halfway, or one that kept a file, is finished by the next.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/build_version.h"
#include "base/sha256.h"
#include "shm/file_system.h"
#include "shm/format.h"
#include "shm/index_file.h"
#include "tools/verbs/install_manifest.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

namespace fs = std::filesystem;

struct UninstallOptions {
    std::string cni_bin_dir, cni_conf_dir;
    std::string run_dir, data_dir;  // default: the installed conflist's ipam.runDir, dataDir
    bool force = false;             // also with claims, and a file changed since install
    bool purge = false;             // also the state
};

std::optional<std::string> read_whole(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

// The ipam section of a conflist (or single-plugin conf) whose ipam type is shmipam.
std::optional<nlohmann::json> shmipam_ipam(const std::string& text) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    const nlohmann::json plugins =
        j.contains("plugins") ? j["plugins"] : nlohmann::json::array({j});
    if (!plugins.is_array()) return std::nullopt;
    for (const auto& p : plugins) {
        if (p.is_object() && p.contains("ipam") && p["ipam"].is_object() &&
            p["ipam"].value("type", "") == "shmipam") {
            return p["ipam"];
        }
    }
    return std::nullopt;
}

// One file to remove, or to keep and say why.
struct Step {
    std::string path;
    bool remove = false;
    std::string note;  // why kept, or what was forced
};

// What --purge removes, decided before anything changes. Only what shmipam names as its own:
// in the runDir, each network's directory (one holding an `index`), _pools/ (pool mode's
// states), _cluster/ (cluster mode's) and .statefulset-recheck; in the dataDir, the files named
// shmipam-* (journal segments, checkpoints) in each directory that holds a shmipam journal, the
// directory too once empty (host-local's files may share it), _cluster/ and the node's name
// file `nodename` (install's default --node-name-file is in the DaemonSet's dataDir). The two
// directories themselves only when nothing else is left in them. Anything else is named, left.
struct Purge {
    std::vector<std::string> trees;       // removed whole
    std::vector<std::string> files;       // removed
    std::vector<std::string> maybe_dirs;  // removed when empty, in this order
    std::vector<std::string> left;        // not shmipam's by these rules
};

bool holds_journal(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n.starts_with(format::kJournalPrefix) || n.starts_with(format::kCheckpointPrefix)) {
            return true;
        }
    }
    return false;
}

void plan_purge_run(const std::string& run, Purge& p) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run, ec)) {
        const std::string n = e.path().filename().string(), path = e.path().string();
        const bool network =
            e.is_directory() && !e.is_symlink() && exists(path + "/" + shm::IndexFile::kFileName);
        if (network || n == "_pools" || n == "_cluster") {
            p.trees.push_back(path);
        } else if (n == ".statefulset-recheck") {
            p.files.push_back(path);
        } else {
            p.left.push_back(path);
        }
    }
    p.maybe_dirs.push_back(run);
}

void plan_purge_journals(const std::string& dir, Purge& p) {
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) {
        const std::string n = f.path().filename().string();
        if (n.starts_with("shmipam-")) {
            p.files.push_back(f.path().string());
        } else {
            p.left.push_back(f.path().string());
        }
    }
    p.maybe_dirs.push_back(dir);
}

void plan_purge_data(const std::string& data, Purge& p) {
    std::error_code ec;
    std::vector<std::string> inner_pools;
    for (const auto& e : fs::directory_iterator(data, ec)) {
        const std::string n = e.path().filename().string(), path = e.path().string();
        if (n == "_cluster" && e.is_directory() && !e.is_symlink()) {
            p.trees.push_back(path);
        } else if (n == "nodename" && e.is_regular_file()) {
            p.files.push_back(path);
        } else if (n == "_pools" && e.is_directory() && !e.is_symlink()) {
            // Pool mode's journals, one directory per state.
            bool any = false;
            for (const auto& s : fs::directory_iterator(path, ec)) {
                if (s.is_directory() && !s.is_symlink() && holds_journal(s.path().string())) {
                    plan_purge_journals(s.path().string(), p);
                    any = true;
                } else {
                    p.left.push_back(s.path().string());
                }
            }
            if (any) inner_pools.push_back(path);
        } else if (e.is_directory() && !e.is_symlink() && holds_journal(path)) {
            plan_purge_journals(path, p);
        } else {
            p.left.push_back(path);
        }
    }
    for (auto& d : inner_pools) p.maybe_dirs.push_back(d);
    p.maybe_dirs.push_back(data);
}

// How many of the node's fixed claims a refusal names (the rest: `shmipamctl claims`).
constexpr size_t kClaimsNamed = 5;

void fsync_dir(const std::string& dir) {
    (void)shm::file_system().sync_dir(dir);  // best effort: the removals are done either way
}

int cmd_uninstall(const UninstallOptions& o) {
    // ---- read and check everything: nothing changes before this is done ----
    for (const auto& [flag, dir] :
         {std::pair{"--cni-bin-dir", o.cni_bin_dir}, std::pair{"--cni-conf-dir", o.cni_conf_dir}}) {
        if (!is_dir(dir)) return cannot_read(std::string(flag) + ": no directory " + dir);
    }
    for (const auto& [flag, dir] :
         {std::pair{"--run-dir", o.run_dir}, std::pair{"--data-dir", o.data_dir}}) {
        if (!dir.empty() && !is_dir(dir)) {
            return cannot_read(std::string(flag) + ": no directory " + dir);
        }
    }
    const std::string mpath = manifest_path(o.cni_conf_dir);
    std::optional<InstallManifest> manifest;
    if (auto text = read_whole(mpath)) {
        std::string why;
        manifest = parse_manifest(*text, &why);
        if (!manifest) return cannot_read(mpath + " " + why + ": nothing removed");
    } else if (exists(mpath)) {
        return cannot_read("cannot read " + mpath + ": " + std::strerror(errno));
    }

    std::vector<Step> steps;
    std::vector<std::string> gone, left;
    std::optional<nlohmann::json> ipam;  // the installed conflist's, for runDir and dataDir
    bool remove_lib_dir = false;
    const std::string lib_dir = o.cni_bin_dir + "/" + kInstallLibDir;
    if (manifest) {
        // The conflist first (the runtime stops sending new pods to the plugin), then the
        // plugin, then its helpers, then their libraries: never a plugin without its helper.
        std::vector<ManifestEntry> order;
        for (const auto& e : manifest->files) {
            if (e.dir == "conf") order.push_back(e);
        }
        for (auto b = std::rbegin(kInstalledBinaries); b != std::rend(kInstalledBinaries); ++b) {
            for (const auto& e : manifest->files) {
                if (e.dir == "bin" && e.path == *b) order.push_back(e);
            }
        }
        for (const auto& e : manifest->files) {
            if (e.dir == "bin" && e.path.find('/') != std::string::npos) order.push_back(e);
        }
        for (const auto& e : order) {
            const std::string path =
                (e.dir == "bin" ? o.cni_bin_dir : o.cni_conf_dir) + "/" + e.path;
            struct stat st {};
            if (::lstat(path.c_str(), &st) != 0) {
                gone.push_back(path);
                continue;
            }
            if (!S_ISREG(st.st_mode)) {
                steps.push_back({path, false, "is not a regular file now: left as it is"});
                continue;
            }
            auto bytes = read_whole(path);
            if (!bytes) return cannot_read("cannot read " + path + ": " + std::strerror(errno));
            if (e.dir == "conf" && !ipam) ipam = shmipam_ipam(*bytes);
            const bool binary = e.dir == "bin" && e.path.find('/') == std::string::npos;
            const auto version = binary ? find_build_version(*bytes) : std::nullopt;
            if (base::sha256_hex(*bytes) == e.sha256) {
                steps.push_back({path, true, ""});
            } else if (version) {
                // Replaced since by another shmipam build (a host install, an older
                // shmipamctl's): shmipam's all the same.
                steps.push_back({path, true, "changed since install, shmipam " + version->text});
            } else if (o.force) {
                steps.push_back({path, true, "changed since install; removed as --force"});
            } else {
                steps.push_back({path, false,
                                 "changed since install (edited by hand?): kept; --force "
                                 "removes it"});
            }
        }
        remove_lib_dir = true;
    } else {
        // Installed before the manifest existed: a binary of ours by its build version alone;
        // the conflist cannot be told from the operator's, so it is named and left.
        bool any = false;
        for (auto b = std::rbegin(kInstalledBinaries); b != std::rend(kInstalledBinaries); ++b) {
            const std::string path = o.cni_bin_dir + "/" + *b;
            auto bytes = read_whole(path);
            if (!bytes) continue;
            if (auto v = find_build_version(*bytes)) {
                steps.push_back({path, true, "version " + v->text + ", no manifest"});
                any = true;
                if (std::string(*b) != "shmipam") remove_lib_dir = true;
            } else {
                left.push_back(path + " (no shmipam build version in it: not known to be ours)");
            }
        }
        if (!any) {
            return cannot_read("no install manifest at " + mpath +
                               " and no shmipam binary with a build version in " + o.cni_bin_dir +
                               ": nothing there is known to be shmipam's; nothing removed");
        }
        if (remove_lib_dir && is_dir(lib_dir)) {
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(lib_dir, ec)) {
                if (e.is_regular_file() && !e.is_symlink()) {
                    steps.push_back({e.path().string(), true, "a helper's library, no manifest"});
                }
            }
        }
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(o.cni_conf_dir, ec)) {
            if (!e.is_regular_file()) continue;
            auto bytes = read_whole(e.path().string());
            if (bytes && shmipam_ipam(*bytes)) {
                if (!ipam) ipam = shmipam_ipam(*bytes);
                left.push_back(e.path().string() +
                               " (a conflist using shmipam; no manifest says install wrote it: "
                               "remove it by hand)");
            }
        }
    }
    // Where the state is: the flags, else the installed conflist's, else the plugin's defaults.
    auto ipam_dir = [&](const char* key, const std::string& fallback) {
        if (ipam && ipam->contains(key) && (*ipam)[key].is_string()) {
            return (*ipam)[key].get<std::string>();
        }
        return std::string(fallback);
    };
    const engine::NetworkConfig defaults;
    const std::string run_dir =
        o.run_dir.empty() ? ipam_dir("runDir", defaults.run_dir) : o.run_dir;
    const std::string data_dir =
        o.data_dir.empty() ? ipam_dir("dataDir", defaults.data_dir) : o.data_dir;

    // The node's fixed-address claims: uninstalling takes their addresses' keeper away.
    if (is_dir(run_dir)) {
        CommonOptions c;
        c.run_dir = run_dir;
        auto claims = list_claims(c);
        if (!claims && !o.force) {
            return cannot_read("cannot list the fixed-address claims under " + run_dir + ": " +
                               claims.error().msg + " (--force uninstalls without looking)");
        }
        if (claims && !claims->empty()) {
            std::ostringstream names;
            for (size_t i = 0; i < claims->size() && i < kClaimsNamed; ++i) {
                const auto& r = (*claims)[i];
                names << (i ? ", " : "") << r.claim.key;
                if (!r.claim.addresses.empty()) names << " " << r.claim.addresses[0].to_string();
                names << " (" << r.network << ")";
            }
            if (claims->size() > kClaimsNamed) names << ", ...";
            if (!o.force) {
                std::cerr << "shmipamctl uninstall: refused: this node holds " << claims->size()
                          << " fixed-address claim" << (claims->size() == 1 ? "" : "s") << " under "
                          << run_dir << ": " << names.str()
                          << "; move those pods off the node or release the claims (shmipamctl "
                             "release --claim), or --force; nothing removed\n";
                return kExitViolations;
            }
            std::cout << "forced: " << claims->size() << " fixed-address claim"
                      << (claims->size() == 1 ? "" : "s") << " on this node (" << names.str() << ")"
                      << (o.purge ? ", purged with the state" : ", left in the state") << "\n";
        }
    }
    Purge purge;
    if (o.purge) {
        if (is_dir(run_dir)) plan_purge_run(run_dir, purge);
        if (is_dir(data_dir)) plan_purge_data(data_dir, purge);
    }

    // ---- change: one installer or uninstaller at a time per bin directory ----
    const std::string lock_path = o.cni_bin_dir + "/" + kInstallLockName;
    auto lock = lock_bin_dir(o.cni_bin_dir);
    if (!lock) return cannot_read(lock.error());
    bool kept = false;
    for (const auto& s : steps) {
        if (!s.remove) {
            std::cout << "kept " << s.path << " (" << s.note << ")\n";
            kept = true;
            continue;
        }
        if (::unlink(s.path.c_str()) != 0 && errno != ENOENT) {
            return cannot_read("cannot remove " + s.path + ": " + std::strerror(errno));
        }
        std::cout << "removed " << s.path << (s.note.empty() ? "" : " (" + s.note + ")") << "\n";
    }
    for (const auto& g : gone) std::cout << "already gone " << g << "\n";
    fsync_dir(o.cni_conf_dir);
    if (remove_lib_dir && is_dir(lib_dir)) {
        if (::rmdir(lib_dir.c_str()) == 0) {
            std::cout << "removed " << lib_dir << "\n";
        } else {
            left.push_back(lib_dir + " (not empty: files install did not write)");
        }
    }
    fsync_dir(o.cni_bin_dir);
    if (o.purge) {
        std::error_code ec;
        for (const auto& t : purge.trees) {
            fs::remove_all(t, ec);
            if (ec) return cannot_read("cannot remove " + t + ": " + ec.message());
            std::cout << "purged " << t << "\n";
        }
        for (const auto& f : purge.files) {
            if (::unlink(f.c_str()) != 0 && errno != ENOENT) {
                return cannot_read("cannot remove " + f + ": " + std::strerror(errno));
            }
            std::cout << "purged " << f << "\n";
        }
        for (const auto& d : purge.maybe_dirs) {
            if (::rmdir(d.c_str()) == 0) std::cout << "purged " << d << "\n";
        }
        for (const auto& l : purge.left) left.push_back(l + " (not shmipam's state: left)");
    } else if (is_dir(run_dir) || is_dir(data_dir)) {
        std::cout << "left the state in " << run_dir << " and " << data_dir
                  << " (--purge removes it)\n";
    }
    for (const auto& l : left) std::cout << "left " << l << "\n";
    if (kept) {
        // The manifest stays: a rerun with --force finds what it kept.
        std::cout << "kept " << mpath << " (it lists what was kept)\n";
        return kExitViolations;
    }
    if (manifest) {
        if (::unlink(mpath.c_str()) != 0 && errno != ENOENT) {
            return cannot_read("cannot remove " + mpath + ": " + std::strerror(errno));
        }
        std::cout << "removed " << mpath << "\n";
        const std::string mdir = o.cni_conf_dir + "/" + kManifestDir;
        if (::rmdir(mdir.c_str()) == 0) std::cout << "removed " << mdir << "\n";
        fsync_dir(o.cni_conf_dir);
    }
    // The last of shmipam in the bin directory, once all else is done: an installer waiting
    // for the lock finds the file gone and locks the one it makes anew (base/file_lock.h).
    ::unlink(lock_path.c_str());
    return kExitClean;
}

}  // namespace

// uninstall reads no common option: its --run-dir is its own (the global one has a default,
// which would hide the installed conflist's runDir).
void register_uninstall(CLI::App& app, CommonOptions&, int& exit_code) {
    auto* verb = app.add_subcommand(
        "uninstall",
        "remove what install wrote (its manifest says: the plugin, helpers, shmipam-lib/, the "
        "conflist; a file changed since is kept unless --force); refused while the node holds "
        "fixed-address claims unless --force; the state only with --purge");
    auto o = std::make_shared<UninstallOptions>();
    verb->add_option("--cni-bin-dir", o->cni_bin_dir, "e.g. /opt/cni/bin")->required();
    verb->add_option("--cni-conf-dir", o->cni_conf_dir, "e.g. /etc/cni/net.d")->required();
    verb->add_option("--run-dir", o->run_dir,
                     "the arenas (default: the installed conflist's ipam.runDir, else "
                     "/run/shmipam)");
    verb->add_option("--data-dir", o->data_dir,
                     "the journals (default: the installed conflist's ipam.dataDir, else "
                     "/var/lib/cni/networks)");
    verb->add_flag("--force", o->force,
                   "also while the node holds fixed-address claims, and a file changed since "
                   "install (an edited conflist)");
    verb->add_flag("--purge", o->purge,
                   "also remove the state: the runDir's networks and pool states, the dataDir's "
                   "journals (nothing else in them)");
    verb->callback([o, &exit_code] { exit_code = cmd_uninstall(*o); });
}

}  // namespace shmipam::tools
