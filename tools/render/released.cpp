// `release` and `gc` answers (released.h): a dry run says "would", so that nobody mistakes it
// for the real thing.
#include "tools/render/released.h"

namespace shmipam::tools {

using nlohmann::json;

json released_json(const std::vector<engine::ReleasedAttachment>& rs, bool applied) {
    json list = json::array();
    for (const auto& r : rs) {
        json a = json::array();
        for (const auto& x : r.addresses) a.push_back(x.to_string());
        list.push_back({{"containerID", r.container_id},
                        {"ifname", r.ifname},
                        {"pod", r.pod},
                        {"addresses", a}});
    }
    return json{{"applied", applied}, {"released", list}};
}

std::string released_text(const std::vector<engine::ReleasedAttachment>& rs, bool applied) {
    std::string out;
    for (const auto& a : rs) {
        std::string addrs;
        for (const auto& x : a.addresses) addrs += (addrs.empty() ? "" : ",") + x.to_string();
        out += (applied ? "released " : "would release ") + a.container_id + "/" + a.ifname +
               (a.pod.empty() ? "" : " (pod " + a.pod + ")") + ": " + addrs + "\n";
    }
    out += std::to_string(rs.size()) +
           (applied ? " attachments released"
                    : " attachments would be released (dry run; --apply to act)") +
           "\n";
    return out;
}

}  // namespace shmipam::tools
