// The install manifest (install_manifest.h).
#include "tools/verbs/install_manifest.h"

#include <nlohmann/json.hpp>

namespace shmipam::tools {

namespace {

bool one_component(const std::string& n) {
    return !n.empty() && n.find('/') == std::string::npos && n != "." && n != ".." &&
           n.find('\0') == std::string::npos;
}

// Whether `e` names a file install writes, inside its directory.
std::optional<std::string> entry_problem(const ManifestEntry& e) {
    if (e.dir == "conf") {
        if (!one_component(e.path) || e.path[0] == '.') return "is not a file name";
        return std::nullopt;
    }
    if (e.dir != "bin") return "is in no directory install writes (\"" + e.dir + "\")";
    for (const char* b : kInstalledBinaries) {
        if (e.path == b) return std::nullopt;
    }
    const std::string lib = std::string(kInstallLibDir) + "/";
    if (e.path.rfind(lib, 0) == 0 && one_component(e.path.substr(lib.size()))) {
        return std::nullopt;
    }
    return "is not a file install writes in the bin directory";
}

}  // namespace

Expected<base::FileLock> lock_bin_dir(const std::string& cni_bin_dir) {
    return base::FileLock::acquire(
        cni_bin_dir + "/" + kInstallLockName, kInstallLockWaitMs,
        {"another shmipamctl install or uninstall",
         "is an install container of another DaemonSet stuck on this node?"},
        kInstallLockMode);
}

std::string manifest_path(const std::string& cni_conf_dir) {
    return cni_conf_dir + "/" + kManifestDir + "/" + kManifestName;
}

std::string manifest_json(const InstallManifest& m) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : m.files) {
        files.push_back({{"dir", f.dir}, {"path", f.path}, {"sha256", f.sha256}});
    }
    return nlohmann::json{{"version", m.version}, {"files", files}}.dump(2) + "\n";
}

std::optional<InstallManifest> parse_manifest(const std::string& text, std::string* why) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        *why = "is not a JSON object";
        return std::nullopt;
    }
    if (!j.contains("files") || !j["files"].is_array()) {
        *why = "has no \"files\" list";
        return std::nullopt;
    }
    InstallManifest m;
    m.version = j.value("version", "");
    for (const auto& f : j["files"]) {
        if (!f.is_object() || !f.contains("dir") || !f["dir"].is_string() || !f.contains("path") ||
            !f["path"].is_string() || !f.contains("sha256") || !f["sha256"].is_string() ||
            f["sha256"].get<std::string>().size() != 64) {
            *why = "has an entry without a dir, a path and a sha256: " + f.dump();
            return std::nullopt;
        }
        ManifestEntry e{f["dir"], f["path"], f["sha256"]};
        if (auto p = entry_problem(e)) {
            *why = "names " + e.dir + " " + e.path + ", which " + *p + " (refused)";
            return std::nullopt;
        }
        m.files.push_back(std::move(e));
    }
    return m;
}

}  // namespace shmipam::tools
