#include "plugin/resolv_conf.h"

#include <fstream>
#include <sstream>

namespace shmipam::cni {

Expected<nlohmann::json> read_resolv_conf(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error(Code::kInvalidConfig, "cannot read resolvConf " + path);
    nlohmann::json dns = nlohmann::json::object();
    std::string line;
    while (std::getline(in, line)) {
        const size_t hash = line.find_first_of("#;");
        if (hash != std::string::npos) line.resize(hash);
        std::stringstream ss(line);
        std::string key;
        if (!(ss >> key)) continue;
        std::string v;
        if (key == "nameserver") {
            if (ss >> v) dns["nameservers"].push_back(v);
        } else if (key == "domain") {
            if (ss >> v) dns["domain"] = v;
        } else if (key == "search") {
            while (ss >> v) dns["search"].push_back(v);
        } else if (key == "options") {
            while (ss >> v) dns["options"].push_back(v);
        }
    }
    return dns;
}

}  // namespace shmipam::cni
