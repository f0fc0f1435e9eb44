#include "driver-sim/controlplane/patch.h"

#include <algorithm>

#include "driver-sim/controlplane/validation.h"

namespace neuron::sim::apiserver {

namespace {

using nlohmann::json;

constexpr std::string_view kMergePatch = "application/merge-patch+json";
constexpr std::string_view kStrategicMergePatch = "application/strategic-merge-patch+json";

// The patch merge key of a list by its field name (k8s.io/api's `patchMergeKey` tags of the
// lists the stand-in is patched in); "" when the list is replaced whole.
std::string_view MergeKey(std::string_view field) {
  if (field == "conditions" || field == "addresses") return "type";
  return "";
}

void MergeInto(json& target, const json& patch, bool strategic);

// A strategic merge of two lists of objects on `key`: the patch's items merged into the stored
// ones of the same key, in the stored order, new keys appended.
void MergeList(json& target, const json& patch, std::string_view key) {
  if (!target.is_array()) target = json::array();
  for (const json& item : patch) {
    const json id = item.is_object() ? item.value(std::string(key), json()) : json();
    auto same = std::find_if(target.begin(), target.end(), [&](const json& t) {
      return t.is_object() && t.value(std::string(key), json()) == id;
    });
    if (same == target.end()) {
      target.push_back(item);
    } else {
      MergeInto(*same, item, true);
    }
  }
}

void MergeInto(json& target, const json& patch, bool strategic) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = json::object();
  for (const auto& [k, v] : patch.items()) {
    if (v.is_null()) {
      target.erase(k);
    } else if (const std::string_view key = MergeKey(k);
               strategic && !key.empty() && v.is_array()) {
      MergeList(target[k], v, key);
    } else {
      MergeInto(target[k], v, strategic);
    }
  }
}

// The first `$`-directive key in `patch` ("" when none).
std::string Directive(const json& patch) {
  if (patch.is_array()) {
    for (const json& item : patch) {
      if (std::string d = Directive(item); !d.empty()) return d;
    }
  }
  if (!patch.is_object()) return "";
  for (const auto& [k, v] : patch.items()) {
    if (k.starts_with("$")) return k;
    if (std::string d = Directive(v); !d.empty()) return d;
  }
  return "";
}

}  // namespace

Patched ApplyPatch(std::string_view content_type, const json& current, const json& patch) {
  const std::string_view type = content_type.substr(0, content_type.find(';'));
  if (type != kMergePatch && type != kStrategicMergePatch) {
    return {json(), StatusAnswer(415, "UnsupportedMediaType",
                                 Cat("the body of the request was in an unknown format - "
                                     "accepted media types include: ",
                                     kStrategicMergePatch, ", ", kMergePatch,
                                     " (the API stand-in's patches)"))};
  }
  if (!patch.is_object()) {
    return {json(), StatusAnswer(400, "BadRequest", "the patch is not a JSON object")};
  }
  const bool strategic = type == kStrategicMergePatch;
  if (const std::string d = strategic ? Directive(patch) : ""; !d.empty()) {
    return {json(), StatusAnswer(400, "BadRequest",
                                 Cat("the patch directive ", d, " is outside the API stand-in"))};
  }
  json out = current;
  MergeInto(out, patch, strategic);
  return {std::move(out), std::nullopt};
}

}  // namespace neuron::sim::apiserver
