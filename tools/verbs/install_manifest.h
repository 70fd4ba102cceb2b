// What shmipamctl install wrote on a node, recorded for shmipamctl uninstall: the manifest
// <cni-conf-dir>/shmipam.d/install-manifest.json. In a subdirectory, as a runtime reads every
// *.json, *.conf and *.conflist directly in the conf directory as a network (libcni's
// ConfFiles), and beside the node's kubeconfig (shmipam.d/shmipam-kubeconfig). Each file is
// named relative to its directory ("bin": the CNI bin directory, "conf": the CNI conf
// directory), so that the same manifest reads the same from the host (/opt/cni/bin) and from a
// container that mounts it elsewhere (/host/opt/cni/bin), with its SHA-256 and the build's
// version:
//   {"version": "0.1.0", "files": [{"dir": "bin", "path": "shmipam", "sha256": "..."}, ...]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/file_lock.h"
#include "base/shipped_libraries.h"
#include "base/status.h"

namespace shmipam::tools {

inline constexpr const char* kManifestDir = "shmipam.d";
inline constexpr const char* kManifestName = "install-manifest.json";
// The helpers' shared libraries, their C library and its loader too, beside them in the bin
// directory (base/shipped_libraries.h).
inline constexpr const char* kInstallLibDir = kShippedLibDir;
// The lock installers (and uninstall) take in the bin directory: one of them at a time.
inline constexpr const char* kInstallLockName = ".shmipam-install.lock";
// An installer copies three binaries and their libraries and renames them: seconds. One that
// holds the lock this long is stuck (a DaemonSet pod frozen on a full disk).
inline constexpr uint64_t kInstallLockWaitMs = 120'000;
// Root's alone: another user who could open it could hold it and stall every install.
inline constexpr mode_t kInstallLockMode = 0600;
// What install puts in the bin directory, the helpers first (install.cpp says why); uninstall
// removes them in the other order, the plugin first.
inline constexpr const char* kInstalledBinaries[] = {"shmipam-cluster", "shmipam-kube", "shmipam"};

struct ManifestEntry {
    std::string dir;   // "bin" or "conf"
    std::string path;  // relative to it
    std::string sha256;
};

struct InstallManifest {
    std::string version;
    std::vector<ManifestEntry> files;
};

std::string manifest_path(const std::string& cni_conf_dir);
// The bin directory's installer lock (base/file_lock.h), waited for at most kInstallLockWaitMs.
Expected<base::FileLock> lock_bin_dir(const std::string& cni_bin_dir);
std::string manifest_json(const InstallManifest& m);
// The manifest in `text`, or why not (not JSON, a field missing, an entry whose path is not
// one install writes: anything but a binary's name or shmipam-lib/<file> in "bin", or one
// file name in "conf").
std::optional<InstallManifest> parse_manifest(const std::string& text, std::string* why);

}  // namespace shmipam::tools
