#include "plugin/cni_args.h"

#include <string_view>
#include <vector>

namespace shmipam::cni {

namespace {

// The pieces of `text` between `sep`s, empty ones included. (A std::stringstream here cost every
// exec 40,000 instructions, most of them its locale's set-up.)
std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> out;
    for (;;) {
        const size_t at = text.find(sep);
        out.push_back(text.substr(0, at));
        if (at == std::string_view::npos) return out;
        text.remove_prefix(at + 1);
    }
}

}  // namespace

Expected<CniArgs> parse_cni_args(const std::string& text) {
    CniArgs out;
    if (text.empty()) return out;
    std::vector<std::pair<std::string, std::string>> pairs;
    bool ignore_unknown = false;
    for (const std::string_view piece : split(text, ';')) {
        const std::string item(piece);
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0) {
            return make_error(Code::kInvalidEnv, "ARGS: invalid pair \"" + item + "\"");
        }
        std::string k = item.substr(0, eq), v = item.substr(eq + 1);
        if (k == "IgnoreUnknown") {
            ignore_unknown = v == "1" || v == "true" || v == "True" || v == "TRUE";
        }
        pairs.emplace_back(std::move(k), std::move(v));
    }
    for (const auto& [k, v] : pairs) {
        if (k == "IgnoreUnknown") continue;
        if (k == "IP") {
            for (const std::string_view ip : split(v, ',')) {
                if (!ip.empty()) out.ips.emplace_back(ip);
            }
        } else if (k == "K8S_POD_NAMESPACE") {
            out.pod_namespace = v;
        } else if (k == "K8S_POD_NAME") {
            out.pod_name = v;
        } else if (k == "K8S_POD_UID") {
            out.pod_uid = v;
        } else if (k == "K8S_POD_INFRA_CONTAINER_ID") {
            // known to Kubernetes' runtimes; nothing to do with it
        } else if (!ignore_unknown) {
            return make_error(Code::kInvalidEnv, "ARGS: unknown args \"" + k + "\"");
        }
    }
    return out;
}

}  // namespace shmipam::cni
