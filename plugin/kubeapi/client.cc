#include "plugin/kubeapi/client.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "core/base/file_io.h"
#include "fmt/format.h"

namespace neuron::kubeapi {

namespace {

// Where the kubelet mounts a pod's service-account credentials (Kubernetes documentation,
// "Accessing the Kubernetes API from a Pod"; client-go rest.InClusterConfig reads the same).
constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr size_t kMaxAnswerBytes = size_t{16} << 20;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

size_t Append(char* data, size_t size, size_t n, void* user) {
  auto* out = static_cast<std::string*>(user);
  if (out->size() + size * n > kMaxAnswerBytes) return 0;  // libcurl fails the transfer
  out->append(data, size * n);
  return size * n;
}

std::string FirstLine(std::string_view body) {
  std::string_view line = body.substr(0, body.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) {
    line.remove_suffix(1);
  }
  return std::string(line);
}

}  // namespace

absl::Status StatusFromHttp(int64_t http_status, std::string_view body) {
  if (http_status >= 200 && http_status < 300) return absl::OkStatus();
  // The API answers errors with a metav1.Status object: kind "Status", message, reason, code.
  std::string message;
  std::string reason;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.value("kind", "") == "Status") {
    message = j.value("message", "");
    reason = j.value("reason", "");
  }
  if (message.empty()) message = FirstLine(body);
  message = fmt::format("HTTP {}: {}", http_status, message);
  switch (http_status) {
    case 400:
    case 422:
      return absl::InvalidArgumentError(message);
    case 401:
      return absl::UnauthenticatedError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 409:
      return reason == "AlreadyExists" ? absl::AlreadyExistsError(message)
                                       : absl::AbortedError(message);
    default:
      break;
  }
  if (http_status >= 500 || http_status == 429) return absl::UnavailableError(message);
  return absl::UnknownError(message);
}

absl::StatusOr<ClientConfig> InClusterConfig() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return absl::FailedPreconditionError(
        "not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset (give "
        "--api-server, --token-file and --ca-file)");
  }
  const std::string_view h = host;
  const bool ipv6 = h.find(':') != std::string_view::npos;
  ClientConfig c;
  c.server = fmt::format("https://{}{}{}:{}", ipv6 ? "[" : "", h, ipv6 ? "]" : "", port);
  c.token_file = fmt::format("{}/token", kServiceAccountDir);
  c.ca_file = fmt::format("{}/ca.crt", kServiceAccountDir);
  return c;
}

Client::Client(ClientConfig config) : config_(std::move(config)) { GlobalInit(); }

absl::StatusOr<std::string> Client::Token() const {
  if (config_.token_file.empty()) return std::string();
  const FileIdentity now = StatFile(config_.token_file);
  absl::MutexLock lock(&mu_);
  if (now.exists && now == token_identity_ && !token_.empty()) return token_;
  absl::StatusOr<std::string> text = ReadAttribute(config_.token_file);
  if (!text.ok()) {
    return absl::UnavailableError(
        fmt::format("service-account token: {}", std::string{text.status().message()}));
  }
  std::string_view t = *text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())) != 0) t.remove_suffix(1);
  token_ = std::string(t);
  token_identity_ = now;
  return token_;
}

namespace {

// One easy handle per thread, reset before each request but kept: libcurl keeps its connections
// and TLS sessions with the handle, so a request to the same API server reuses the connection
// instead of a TCP and TLS handshake each time (a claim look-up inside NodePrepareResources:
// bench/dra_bench).
CURL* ThreadHandle() {
  thread_local const std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
  if (handle != nullptr) curl_easy_reset(handle.get());
  return handle.get();
}

}  // namespace

absl::StatusOr<nlohmann::json> Client::Get(std::string_view path) const {
  return Request("GET", path, nullptr);
}
absl::StatusOr<nlohmann::json> Client::Post(std::string_view path,
                                            const nlohmann::json& body) const {
  return Request("POST", path, &body);
}
absl::StatusOr<nlohmann::json> Client::Put(std::string_view path,
                                           const nlohmann::json& body) const {
  return Request("PUT", path, &body);
}
absl::StatusOr<nlohmann::json> Client::Patch(std::string_view path, const nlohmann::json& body,
                                             std::string_view content_type) const {
  return Request("PATCH", path, &body, content_type);
}
absl::StatusOr<nlohmann::json> Client::Delete(std::string_view path) const {
  return Request("DELETE", path, nullptr);
}
absl::StatusOr<nlohmann::json> Client::Delete(std::string_view path,
                                              const nlohmann::json& options) const {
  return Request("DELETE", path, &options);
}

absl::StatusOr<std::vector<nlohmann::json>> Client::Watch(std::string_view path) const {
  absl::StatusOr<std::string> answer = Exchange("GET", path, nullptr);
  if (!answer.ok()) return answer.status();
  std::vector<nlohmann::json> events;
  std::string_view rest = *answer;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (line.empty()) continue;
    nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object() || !event.contains("type")) {
      return absl::DataLossError(
          fmt::format("GET {}: not a watch event: {}", path, FirstLine(line)));
    }
    events.push_back(std::move(event));
  }
  return events;
}

absl::StatusOr<nlohmann::json> Client::Request(std::string_view method, std::string_view path,
                                               const nlohmann::json* body,
                                               std::string_view content_type) const {
  absl::StatusOr<std::string> answer = Exchange(method, path, body, content_type);
  if (!answer.ok()) return answer.status();
  nlohmann::json j = nlohmann::json::parse(*answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::DataLossError(
        fmt::format("{} {}: answer is not JSON: {}", method, path, FirstLine(*answer)));
  }
  return j;
}

absl::StatusOr<std::string> Client::Exchange(std::string_view method, std::string_view path,
                                             const nlohmann::json* body,
                                             std::string_view content_type) const {
  absl::StatusOr<std::string> token = Token();
  if (!token.ok()) return token.status();
  CURL* const c = ThreadHandle();
  if (c == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  const std::string url = fmt::format("{}{}", config_.server, path);
  const std::string method_str(method);
  const std::string payload = body != nullptr ? body->dump() : std::string();
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  const std::string type_header = fmt::format("Content-Type: {}", content_type);
  if (body != nullptr) headers = curl_slist_append(headers, type_header.c_str());
  const std::string auth = "Authorization: Bearer " + *token;
  if (!token->empty()) headers = curl_slist_append(headers, auth.c_str());
  const std::unique_ptr<curl_slist, SlistDeleter> header_list(headers);
  std::string answer;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method_str.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  if (body != nullptr) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
  }
  if (!config_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, config_.ca_file.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  const CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(
        fmt::format("{} {}: no answer within {} ms", method, url, config_.timeout.count()));
  }
  if (rc != CURLE_OK) {
    return absl::UnavailableError(fmt::format("{} {}: {}", method, url, curl_easy_strerror(rc)));
  }
  long http_status = 0;  // NOLINT(google-runtime-int): CURLINFO_RESPONSE_CODE writes a long
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http_status);
  if (absl::Status s = StatusFromHttp(http_status, answer); !s.ok()) {
    return absl::Status(s.code(), fmt::format("{} {}: {}", method, path, std::string{s.message()}));
  }
  return answer;
}

}  // namespace neuron::kubeapi
