#include "pools/pool_dir.h"

#include <dirent.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shmipam::pools {

using nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// YAML 1.2 core schema for plain scalars (what Kubernetes' YAML reader gives): null, booleans,
// integers; quoted scalars are always strings.
json scalar_to_json(const YAML::Node& n) {
    const std::string& s = n.Scalar();
    if (n.Tag() == "!") return s;  // quoted
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (!s.empty() &&
        (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+')) {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (errno == 0 && end != nullptr && *end == '\0') return v;
    }
    return s;
}

json to_json(const YAML::Node& n) {
    switch (n.Type()) {
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
            return nullptr;
        case YAML::NodeType::Scalar:
            return scalar_to_json(n);
        case YAML::NodeType::Sequence: {
            json a = json::array();
            for (const auto& item : n) a.push_back(to_json(item));
            return a;
        }
        case YAML::NodeType::Map: {
            json o = json::object();
            for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second);
            return o;
        }
    }
    return nullptr;
}

void add_document(Catalog& catalog, const std::string& file, size_t& document, const json& doc) {
    if (doc.is_null()) return;  // an empty document (a trailing `---`)
    const std::string kind = doc.is_object() ? doc.value("kind", "") : "";
    if (doc.is_object() && ends_with(kind, "List") && doc.contains("items")) {
        if (!doc["items"].is_array()) {
            catalog.add_problem(file, file + ": " + kind + " items must be a list");
            return;
        }
        for (const auto& item : doc["items"]) add_document(catalog, file, document, item);
        return;
    }
    ++document;
    auto decoded = decode_object(doc, Origin{file, document});
    if (decoded) {
        catalog.add(std::move(*decoded));
        return;
    }
    catalog.add_problem(file, decoded.error().msg);
    // The object by that name is out of service: say why when it is asked for.
    if (doc.is_object() && doc.contains("metadata") && doc["metadata"].is_object() &&
        doc["metadata"].contains("name") && doc["metadata"]["name"].is_string()) {
        catalog.withdraw(doc["metadata"]["name"].get<std::string>(), decoded.error().msg);
    }
}

}  // namespace

void load_text(Catalog& catalog, const std::string& file_name, const std::string& text) {
    size_t document = 0;
    if (ends_with(file_name, ".json")) {
        json doc = json::parse(text, nullptr, false);
        if (doc.is_discarded()) {
            catalog.add_problem(file_name, file_name + ": not valid JSON");
            return;
        }
        add_document(catalog, file_name, document, doc);
        return;
    }
    try {
        for (const YAML::Node& n : YAML::LoadAll(text)) {
            add_document(catalog, file_name, document, to_json(n));
        }
    } catch (const YAML::Exception& e) {
        catalog.add_problem(file_name, file_name + ": not valid YAML: " + e.what());
    }
}

Expected<Catalog> load_pools_dir(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        return make_error(Code::kInvalidConfig,
                          "poolsDir " + dir + " cannot be read: " + std::strerror(errno));
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.empty() || name[0] == '.') continue;
        if (ends_with(name, ".yaml") || ends_with(name, ".yml") || ends_with(name, ".json")) {
            names.push_back(name);
        }
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    Catalog catalog;
    for (const auto& name : names) {
        std::ifstream in(dir + "/" + name, std::ios::binary);
        if (!in) {
            catalog.add_problem(name, name + ": cannot be read");
            continue;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        load_text(catalog, name, ss.str());
    }
    catalog.finish();
    return catalog;
}

}  // namespace shmipam::pools
