#include "driver-sim/controlplane/api_server.h"

#include <charconv>
#include <vector>

#include "driver-sim/controlplane/patch.h"
#include "driver-sim/controlplane/validation.h"

namespace neuron::sim::apiserver {

namespace {

using nlohmann::json;

constexpr std::string_view kPrefixes[] = {"/apis/resource.k8s.io/v1/",
                                          "/apis/coordination.k8s.io/v1/", "/api/v1/"};
constexpr int kDefaultWatchSeconds = 30;
constexpr int kMaxWatchSeconds = 60;

HttpResponse ToHttp(const ApiAnswer& a) {
  HttpResponse r;
  r.status = a.code;
  r.content_type = "application/json";
  r.body = a.body.dump();
  return r;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string UrlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

std::string QueryValue(std::string_view query, std::string_view key) {
  for (std::string_view kv : Split(query, '&')) {
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key) {
      return eq == std::string_view::npos ? "" : UrlDecode(kv.substr(eq + 1));
    }
  }
  return "";
}

// A request target below one of kPrefixes, split: [namespaces/NS/]RESOURCE[/NAME[/status]].
struct Target {
  const Kind* kind = nullptr;
  std::string ns;
  std::string name;
  bool status = false;
};

std::optional<Target> ParseTarget(std::string_view path) {
  std::string_view prefix;
  for (std::string_view p : kPrefixes) {
    if (path.starts_with(p)) prefix = p;
  }
  if (prefix.empty()) return std::nullopt;
  std::vector<std::string> parts;
  for (std::string_view part : Split(path.substr(prefix.size()), '/')) parts.emplace_back(part);
  Target t;
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "namespaces") {
    t.ns = parts[1];
    i = 2;
  }
  if (i >= parts.size()) return std::nullopt;
  t.kind = FindKind(prefix, parts[i]);
  if (t.kind == nullptr || (!t.ns.empty() && !t.kind->namespaced)) return std::nullopt;
  if (i + 1 < parts.size()) t.name = parts[i + 1];
  if (i + 2 < parts.size()) {
    if (parts[i + 2] != "status" || !t.kind->status_subresource || i + 3 != parts.size()) {
      return std::nullopt;
    }
    t.status = true;
  }
  // A namespaced kind's single object needs its namespace.
  if (t.kind->namespaced && !t.name.empty() && t.ns.empty()) return std::nullopt;
  return t;
}

// One request's handling: the store, the admission policies, who asks, and what.
struct Call {
  Store& store;
  const AdmissionPolicies& admission;
  const UserInfo& user;
  const Target& t;
  const HttpRequest& req;
};

// The write's admission (admission.h); nullopt to go on.
std::optional<ApiAnswer> Admit(const Call& c, const char* operation, const std::string& name,
                               const json* object, const json* old_object) {
  return c.admission.Admit({.operation = operation,
                            .kind = c.t.kind,
                            .status = c.t.status,
                            .ns = c.t.ns,
                            .name = name,
                            .user = &c.user,
                            .object = object,
                            .old_object = old_object});
}

ApiAnswer Create(const Call& c) {
  if (c.t.kind->namespaced && c.t.ns.empty()) {
    return StatusAnswer(405, "MethodNotAllowed",
                        Cat("create ", c.t.kind->resource,
                            " in a namespace: POST "
                            "/apis/.../namespaces/NS/",
                            c.t.kind->resource));
  }
  json body = json::parse(c.req.body, nullptr, false);
  if (body.is_discarded()) return StatusAnswer(400, "BadRequest", "the body is not JSON");
  if (body.is_object() && c.t.kind->namespaced) body["metadata"]["namespace"] = c.t.ns;
  const std::string name =
      body.is_object() ? body.value("/metadata/name"_json_pointer, std::string()) : "";
  if (std::optional<ApiAnswer> denied = Admit(c, "CREATE", name, &body, nullptr)) return *denied;
  return c.store.Create(*c.t.kind, c.t.ns, std::move(body));
}

ApiAnswer Collection(const Call& c) {
  const HttpRequest& req = c.req;
  const std::string labels = QueryValue(req.query, "labelSelector");
  const std::string fields = QueryValue(req.query, "fieldSelector");
  if (req.method == "POST") return Create(c);
  if (req.method != "GET" && req.method != "HEAD") {
    return StatusAnswer(405, "MethodNotAllowed", "the server does not allow this method");
  }
  const std::string watch = QueryValue(req.query, "watch");
  if (watch != "1" && watch != "true") return c.store.List(*c.t.kind, c.t.ns, labels, fields);
  uint64_t since = 0;
  const std::string rv = QueryValue(req.query, "resourceVersion");
  std::from_chars(rv.data(), rv.data() + rv.size(), since);
  int seconds = kDefaultWatchSeconds;
  const std::string timeout = QueryValue(req.query, "timeoutSeconds");
  std::from_chars(timeout.data(), timeout.data() + timeout.size(), seconds);
  seconds = std::clamp(seconds, 0, kMaxWatchSeconds);
  return c.store.Watch(*c.t.kind, c.t.ns, since, labels, fields, std::chrono::seconds(seconds));
}

// A PATCH (patch.h) of the object or its status: read, patched, admitted and written with the
// resourceVersion read, again when another write came between (as the real server retries a
// patch that names no resourceVersion; one that names it gets the 409).
ApiAnswer PatchItem(const Call& c) {
  const json patch = json::parse(c.req.body, nullptr, false);
  if (patch.is_discarded()) return StatusAnswer(400, "BadRequest", "the body is not JSON");
  const std::string type(c.req.Header("Content-Type").value_or(""));
  const bool conditional = patch.is_object() && patch.contains("metadata") &&
                           patch["metadata"].is_object() &&
                           patch["metadata"].contains("resourceVersion");
  for (int attempt = 1;; ++attempt) {
    ApiAnswer current = c.store.Get(*c.t.kind, c.t.ns, c.t.name);
    if (current.code != 200) return current;
    Patched patched = ApplyPatch(type, current.body, patch);
    if (patched.error) return *patched.error;
    if (std::optional<ApiAnswer> denied =
            Admit(c, "UPDATE", c.t.name, &patched.object, &current.body)) {
      return *denied;
    }
    ApiAnswer answer =
        c.store.Update(*c.t.kind, c.t.ns, c.t.name, std::move(patched.object), c.t.status);
    if (answer.code != 409 || conditional || attempt == 5) return answer;
  }
}

ApiAnswer Item(const Call& c) {
  const HttpRequest& req = c.req;
  const Target& t = c.t;
  if (req.method == "GET" || req.method == "HEAD") return c.store.Get(*t.kind, t.ns, t.name);
  if (req.method == "PATCH") return PatchItem(c);
  ApiAnswer current = c.store.Get(*t.kind, t.ns, t.name);
  if (req.method == "DELETE") {
    // A DELETE may carry DeleteOptions, whose preconditions the store checks.
    const json options = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (!options.is_object()) {
      return StatusAnswer(400, "BadRequest", "the body is not DeleteOptions");
    }
    if (current.code != 200) return current;
    if (std::optional<ApiAnswer> denied = Admit(c, "DELETE", t.name, nullptr, &current.body)) {
      return *denied;
    }
    return c.store.Delete(*t.kind, t.ns, t.name, options.value("preconditions", json()));
  }
  if (req.method == "PUT") {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return StatusAnswer(400, "BadRequest", "the body is not JSON");
    if (current.code == 200) {
      if (std::optional<ApiAnswer> denied = Admit(c, "UPDATE", t.name, &body, &current.body)) {
        return *denied;
      }
    }
    return c.store.Update(*t.kind, t.ns, t.name, std::move(body), t.status);
  }
  return StatusAnswer(405, "MethodNotAllowed", "the server does not allow this method");
}

// One line per event, as the watch stream carries them.
HttpResponse WatchLines(const ApiAnswer& a) {
  if (a.code != 200) return ToHttp(a);
  HttpResponse r;
  r.content_type = "application/json";
  for (const json& event : a.body) r.body += Cat(event.dump(), "\n");
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(Options options) {
  std::unique_ptr<ApiServer> s(new ApiServer(std::move(options)));
  absl::StatusOr<AdmissionPolicies> admission = AdmissionPolicies::Load(s->options_.admission);
  if (!admission.ok()) return admission.status();
  s->admission_ = *std::move(admission);
  if (s->options_.tls) {
    absl::StatusOr<CaFiles> ca = MakeTestCa(s->options_.cert_dir);
    if (!ca.ok()) return ca.status();
    s->ca_ = *std::move(ca);
  }
  if (absl::Status st = s->Listen(s->options_.listen); !st.ok()) return st;
  return s;
}

ApiServer::~ApiServer() {
  std::lock_guard<std::mutex> lock(mu_);
  server_.reset();
}

std::string ApiServer::url() const {
  return Cat(options_.tls ? "https" : "http", "://127.0.0.1:", port_.load());
}

std::string ApiServer::ca_file() const { return ca_.ca_cert; }

absl::Status ApiServer::Listen(const std::string& address) {
  HttpServer::Options o;
  o.listen_address = address;
  if (options_.tls) {
    WebConfig wc;
    wc.tls = TlsServerConfig{};
    wc.tls->cert_file = ca_.server_cert;
    wc.tls->key_file = ca_.server_key;
    o.web_config = wc;
  }
  o.write_methods = true;
  o.max_request_bytes = 1 << 20;  // a slice of 128 devices with 32 attributes each fits
  o.threads = 8;                  // watches hold a worker while they wait
  o.logger_name = "sim.apiserver";
  o.fallback = [this](const HttpRequest& r) { return Handle(r); };
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(o));
  if (!server.ok()) return server.status();
  std::lock_guard<std::mutex> lock(mu_);
  server_ = *std::move(server);
  port_ = server_->port();
  return absl::OkStatus();
}

absl::Status ApiServer::SetReachable(bool reachable) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reachable) {
      server_.reset();
      return absl::OkStatus();
    }
    if (server_ != nullptr) return absl::OkStatus();
  }
  return Listen(Cat("127.0.0.1:", port_.load()));
}

HttpResponse ApiServer::Handle(const HttpRequest& req) {
  // A body whose fields have unexpected types makes nlohmann-json throw: the real server answers
  // a body it cannot decode with 400.
  try {
    return Serve(req);
  } catch (const json::exception& e) {
    return ToHttp(StatusAnswer(400, "BadRequest", Cat("the body cannot be decoded: ", e.what())));
  }
}

// Who the bearer token is: one of the stand-in's own tokens (full or read-only, users of their
// own that no policy names) or a service account's token bound to a node; nullopt when none.
std::optional<UserInfo> ApiServer::Authenticate(const HttpRequest& req, bool* may_write) const {
  const std::optional<std::string_view> auth = req.Header("Authorization");
  std::string token;
  if (auth && auth->starts_with("Bearer ")) token = std::string(auth->substr(7));
  *may_write = true;
  if (options_.tokens.contains(token)) return UserInfo{.username = "stand-in:admin"};
  if (const auto it = options_.service_account_tokens.find(token);
      it != options_.service_account_tokens.end()) {
    return it->second;
  }
  *may_write = false;
  if (options_.read_only_tokens.contains(token)) return UserInfo{.username = "stand-in:viewer"};
  return std::nullopt;
}

HttpResponse ApiServer::Serve(const HttpRequest& req) {
  bool may_write = false;
  const std::optional<UserInfo> user = Authenticate(req, &may_write);
  if (!user) return ToHttp(StatusAnswer(401, "Unauthorized", "Unauthorized"));
  const std::optional<Target> t = ParseTarget(req.path);
  if (!t) {
    return ToHttp(
        StatusAnswer(404, "NotFound", "the server could not find the requested resource"));
  }
  if (!may_write && req.method != "GET" && req.method != "HEAD") {
    return ToHttp(
        StatusAnswer(403, "Forbidden",
                     Cat(t->kind->resource, " \"", t->name,
                         "\" is forbidden: ", "the token may not ", req.method, " resource \"",
                         t->kind->resource, "\" in API group \"", t->kind->api_version, "\"")));
  }
  const Call call{store_, admission_, *user, *t, req};
  if (t->name.empty()) {
    const ApiAnswer a = Collection(call);
    const std::string watch = QueryValue(req.query, "watch");
    return (watch == "1" || watch == "true") && req.method == "GET" ? WatchLines(a) : ToHttp(a);
  }
  return ToHttp(Item(call));
}

}  // namespace neuron::sim::apiserver
