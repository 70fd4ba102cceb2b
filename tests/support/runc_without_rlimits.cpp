// runc, minus the resource limits podman asks it to set (tests/e2e/podman_e2e_test.cpp).
//
// Rootful podman always asks the OCI runtime for RLIMIT_NOFILE and RLIMIT_NPROC, and runc sets
// them on the container's process from outside (prlimit). A kernel that refuses that to a
// caller without CAP_SYS_RESOURCE (the VMs CI runs on) fails every container with "error
// setting rlimit ... operation not permitted". This wrapper drops `process.rlimits` from the
// bundle's config.json (and from `runc exec`'s process file) and execs the real runc with the same
// arguments: the container keeps the limits it inherits, everything else is runc's own doing.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

// Erases `rlimits` from the object at `pointer` in the JSON file at `path`.
void drop_rlimits(const std::string& path, const nlohmann::json::json_pointer& pointer) {
    nlohmann::json doc;
    {
        std::ifstream in(path);
        doc = nlohmann::json::parse(in, nullptr, false);
    }
    if (!doc.is_object() || !doc.contains(pointer) || !doc[pointer].is_object()) return;
    doc[pointer].erase("rlimits");
    std::ofstream(path, std::ios::trunc) << doc.dump();
}

}  // namespace

int main(int argc, char** argv) {
    // `runc create --bundle DIR` (config.json's process) and `runc exec --process FILE`.
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const std::string next = i + 1 < argc ? argv[i + 1] : "";
        if (a == "--bundle" || a == "-b")
            drop_rlimits(next + "/config.json", "/process"_json_pointer);
        if (a.rfind("--bundle=", 0) == 0) {
            drop_rlimits(a.substr(9) + "/config.json", "/process"_json_pointer);
        }
        if (a == "--process" || a == "-p") drop_rlimits(next, ""_json_pointer);
        if (a.rfind("--process=", 0) == 0) drop_rlimits(a.substr(10), ""_json_pointer);
    }
    argv[0] = const_cast<char*>("runc");
    ::execv(RUNC_PATH, argv);
    std::perror(RUNC_PATH);
    return 127;
}
