#include "plugin/cni_env.h"

#include <cctype>
#include <vector>

#include "ipam/config_fields.h"

namespace shmipam::cni {

using ipam::config_fields::matches_cni_pattern;

Status validate_container_id(const std::string& id) {
    if (id.empty()) return make_error(Code::kUnknownContainer, "missing containerID");
    if (!matches_cni_pattern(id)) {
        return make_error(Code::kInvalidEnv, "invalid characters in containerID", id);
    }
    return Ok{};
}

Status validate_ifname(const std::string& ifname) {
    if (ifname.empty()) return make_error(Code::kInvalidEnv, "interface name is empty");
    if (ifname.size() > 15)
        return make_error(Code::kInvalidEnv, "interface name is too long", ifname);
    if (ifname == "." || ifname == "..") {
        return make_error(Code::kInvalidEnv, "interface name is . or ..", ifname);
    }
    for (unsigned char c : ifname) {
        if (c == '/' || c == ':' || std::isspace(c)) {
            return make_error(Code::kInvalidEnv,
                              "interface name contains / or : or whitespace characters", ifname);
        }
    }
    return Ok{};
}

Expected<CniEnv> read_env(const EnvLookup& env) {
    CniEnv out;
    auto cmd = env("CNI_COMMAND");
    if (!cmd || cmd->empty()) {
        return make_error(Code::kInvalidEnv, "required env variables [CNI_COMMAND] missing");
    }
    static const std::pair<const char*, Command> kCommands[] = {
        {"ADD", Command::kAdd},         {"DEL", Command::kDel}, {"CHECK", Command::kCheck},
        {"VERSION", Command::kVersion}, {"GC", Command::kGc},   {"STATUS", Command::kStatus}};
    bool known = false;
    for (const auto& [name, c] : kCommands) {
        if (*cmd == name) {
            out.command = c;
            known = true;
        }
    }
    if (!known) return make_error(Code::kInvalidEnv, "unknown CNI_COMMAND: " + *cmd);
    if (out.command == Command::kVersion) return out;

    const bool attachment = out.command == Command::kAdd || out.command == Command::kDel ||
                            out.command == Command::kCheck;
    std::vector<std::string> missing;
    auto get = [&](const char* name, bool required, std::string* into) {
        auto v = env(name);
        if (v && !v->empty()) {
            *into = *v;
        } else if (required) {
            missing.push_back(name);
        }
    };
    get("CNI_CONTAINERID", attachment, &out.container_id);
    get("CNI_NETNS", out.command == Command::kAdd || out.command == Command::kCheck, &out.netns);
    get("CNI_IFNAME", attachment, &out.ifname);
    get("CNI_ARGS", false, &out.args);
    get("CNI_PATH", true, &out.path);
    if (!missing.empty()) {
        std::string list;
        for (const auto& m : missing) list += (list.empty() ? "" : ",") + m;
        return make_error(Code::kInvalidEnv, "required env variables [" + list + "] missing");
    }
    if (attachment) {
        if (auto st = validate_container_id(out.container_id); !st) return st.error();
        if (auto st = validate_ifname(out.ifname); !st) return st.error();
    }
    return out;
}

}  // namespace shmipam::cni
