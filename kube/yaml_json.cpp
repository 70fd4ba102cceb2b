#include "kube/yaml_json.h"

#include <yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace shmipam::kube {

using nlohmann::json;

namespace {

// Deeper nesting than any kubeconfig has: a deep or self-referencing document (YAML aliases) is
// cut there rather than followed.
constexpr int kMaxDepth = 64;

// YAML 1.2 core schema for plain scalars: null, booleans, integers; quoted and block scalars are
// always strings.
json scalar_to_json(const yaml_node_t& n) {
    const std::string s(reinterpret_cast<const char*>(n.data.scalar.value), n.data.scalar.length);
    if (n.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return s;
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+') {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (errno == 0 && end != nullptr && *end == '\0') return v;
    }
    return s;
}

// Nodes after alias expansion (libyaml shares an aliased node, the conversion copies it): a
// kubeconfig has a few hundred; 100,000 stops an alias bomb in time and memory.
constexpr size_t kMaxNodes = 100'000;

json node_to_json(yaml_document_t& doc, int index, int depth, size_t& nodes) {
    if (++nodes > kMaxNodes) return nullptr;
    yaml_node_t* n = yaml_document_get_node(&doc, index);
    if (n == nullptr || depth > kMaxDepth) return nullptr;
    switch (n->type) {
        case YAML_SCALAR_NODE:
            return scalar_to_json(*n);
        case YAML_SEQUENCE_NODE: {
            json a = json::array();
            for (yaml_node_item_t* i = n->data.sequence.items.start; i < n->data.sequence.items.top;
                 ++i) {
                a.push_back(node_to_json(doc, *i, depth + 1, nodes));
            }
            return a;
        }
        case YAML_MAPPING_NODE: {
            json o = json::object();
            for (yaml_node_pair_t* p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
                 ++p) {
                json key = node_to_json(doc, p->key, depth + 1, nodes);
                o[key.is_string() ? key.get<std::string>() : key.dump()] =
                    node_to_json(doc, p->value, depth + 1, nodes);
            }
            return o;
        }
        case YAML_NO_NODE:
            break;
    }
    return nullptr;
}

}  // namespace

Expected<json> yaml_to_json(std::string_view text, const std::string& where) {
    yaml_parser_t parser;
    if (yaml_parser_initialize(&parser) == 0) {
        return make_error(Code::kInvalidConfig, where + ": out of memory reading YAML");
    }
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    yaml_document_t doc;
    if (yaml_parser_load(&parser, &doc) == 0) {
        Error e = make_error(Code::kInvalidConfig,
                             where + " is not valid YAML: " +
                                 (parser.problem != nullptr ? parser.problem : "parse error") +
                                 " at line " + std::to_string(parser.problem_mark.line + 1));
        yaml_parser_delete(&parser);
        return e;
    }
    size_t nodes = 0;
    json out =
        yaml_document_get_root_node(&doc) == nullptr ? json() : node_to_json(doc, 1, 0, nodes);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (nodes > kMaxNodes) {
        return make_error(Code::kInvalidConfig, where + " expands to more than 100,000 YAML nodes "
                                                        "(the bound for a kubeconfig)");
    }
    return out;
}

}  // namespace shmipam::kube
