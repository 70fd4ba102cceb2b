// shmipamctl explain's output: which rule applied, what each family's rule named, which filter
// removed which pool and why, the order the pools would be tried in (with how many addresses
// each may hand out), the error an ADD would get, and the problems of the pools directory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "pools/catalog.h"
#include "pools/selection.h"

namespace shmipam::tools {

std::string explain_text(const pools::Selection& s, const pools::Catalog& catalog);
nlohmann::json explain_json(const pools::Selection& s, const pools::Catalog& catalog);

}  // namespace shmipam::tools
