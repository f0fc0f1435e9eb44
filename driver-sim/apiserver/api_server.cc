#include "driver-sim/apiserver/api_server.h"

#include <charconv>
#include <vector>

#include "driver-sim/apiserver/validation.h"

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

ApiAnswer Collection(Store& store, const Target& t, const HttpRequest& req) {
  const std::string labels = QueryValue(req.query, "labelSelector");
  const std::string fields = QueryValue(req.query, "fieldSelector");
  if (req.method == "POST") {
    if (t.kind->namespaced && t.ns.empty()) {
      return StatusAnswer(405, "MethodNotAllowed",
                          Cat("create ", t.kind->resource,
                              " in a namespace: POST "
                              "/apis/.../namespaces/NS/",
                              t.kind->resource));
    }
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return StatusAnswer(400, "BadRequest", "the body is not JSON");
    return store.Create(*t.kind, t.ns, std::move(body));
  }
  if (req.method != "GET" && req.method != "HEAD") {
    return StatusAnswer(405, "MethodNotAllowed", "the server does not allow this method");
  }
  const std::string watch = QueryValue(req.query, "watch");
  if (watch != "1" && watch != "true") return store.List(*t.kind, t.ns, labels, fields);
  uint64_t since = 0;
  const std::string rv = QueryValue(req.query, "resourceVersion");
  std::from_chars(rv.data(), rv.data() + rv.size(), since);
  int seconds = kDefaultWatchSeconds;
  const std::string timeout = QueryValue(req.query, "timeoutSeconds");
  std::from_chars(timeout.data(), timeout.data() + timeout.size(), seconds);
  seconds = std::clamp(seconds, 0, kMaxWatchSeconds);
  return store.Watch(*t.kind, t.ns, since, labels, fields, std::chrono::seconds(seconds));
}

ApiAnswer Item(Store& store, const Target& t, const HttpRequest& req) {
  if (req.method == "GET" || req.method == "HEAD") return store.Get(*t.kind, t.ns, t.name);
  if (req.method == "DELETE") {
    // A DELETE may carry DeleteOptions, whose preconditions the store checks.
    const json options = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (!options.is_object()) {
      return StatusAnswer(400, "BadRequest", "the body is not DeleteOptions");
    }
    return store.Delete(*t.kind, t.ns, t.name, options.value("preconditions", json()));
  }
  if (req.method == "PUT") {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return StatusAnswer(400, "BadRequest", "the body is not JSON");
    return store.Update(*t.kind, t.ns, t.name, std::move(body), t.status);
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

HttpResponse ApiServer::Serve(const HttpRequest& req) {
  const std::optional<std::string_view> auth = req.Header("Authorization");
  std::string token;
  if (auth && auth->starts_with("Bearer ")) token = std::string(auth->substr(7));
  const bool full = options_.tokens.contains(token);
  if (!full && !options_.read_only_tokens.contains(token)) {
    return ToHttp(StatusAnswer(401, "Unauthorized", "Unauthorized"));
  }
  const std::optional<Target> t = ParseTarget(req.path);
  if (!t) {
    return ToHttp(
        StatusAnswer(404, "NotFound", "the server could not find the requested resource"));
  }
  if (!full && req.method != "GET" && req.method != "HEAD") {
    return ToHttp(
        StatusAnswer(403, "Forbidden",
                     Cat(t->kind->resource, " \"", t->name,
                         "\" is forbidden: ", "the token may not ", req.method, " resource \"",
                         t->kind->resource, "\" in API group \"", t->kind->api_version, "\"")));
  }
  if (t->name.empty()) {
    const ApiAnswer a = Collection(store_, *t, req);
    const std::string watch = QueryValue(req.query, "watch");
    return (watch == "1" || watch == "true") && req.method == "GET" ? WatchLines(a) : ToHttp(a);
  }
  return ToHttp(Item(store_, *t, req));
}

}  // namespace neuron::sim::apiserver
