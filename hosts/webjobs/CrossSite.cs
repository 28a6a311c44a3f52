using System.Net;

namespace RouteLock.WebJobsHost;

/// <summary>
/// The embedded host's defence against cross-site requests (local/crossSite.ts), ported rule for rule:
/// the front door checks no function keys and under ROUTELOCK_AUTH=none every caller holds every role, so a
/// page in a browser on this machine must not reach /api/. It reads what browsers send on their own and a
/// page cannot forge (`Sec-Fetch-Site`, `Origin`); a request with neither (curl, the CLI, Node's fetch)
/// passes. Refused: `Sec-Fetch-Site: cross-site|same-site` unless a top-level GET/HEAD navigation, and an
/// `Origin` that is not `http://<the Host header>`.
/// </summary>
public static class CrossSite
{
    public static string? Refusal(HttpListenerRequest request)
    {
        string method = request.HttpMethod.ToUpperInvariant();
        string? site = request.Headers["Sec-Fetch-Site"]?.Trim().ToLowerInvariant();
        if ((site == "cross-site" || site == "same-site") && !IsPageNavigation(method, request.Headers["Sec-Fetch-Mode"], request.Headers["Sec-Fetch-Dest"]))
            return $"A browser sent this request from another site (Sec-Fetch-Site: {site}); this host answers its own pages and clients without a browser only.";
        string? origin = request.Headers["Origin"];
        if (origin != null && !IsOwnOrigin(origin, request.Headers["Host"]))
            return $"A browser sent this request from {origin}, not from this host; this host answers its own pages and clients without a browser only.";
        return null;
    }

    static bool IsPageNavigation(string method, string? mode, string? dest) =>
        (method == "GET" || method == "HEAD")
        && mode?.Trim().ToLowerInvariant() == "navigate"
        && (dest == null || dest.Trim().ToLowerInvariant() == "document");

    /// <summary>`origin` is `http://<the Host header>` (plain HTTP), default port and case normalized.</summary>
    static bool IsOwnOrigin(string origin, string? host)
    {
        if (host == null) return false;
        if (!Uri.TryCreate($"http://{host}", UriKind.Absolute, out var own)) return false;
        // `null` (a sandboxed frame, a file: page, a cross-site redirect) is no absolute URI at all
        if (!Uri.TryCreate(origin, UriKind.Absolute, out var theirs)) return false;
        if (theirs.Scheme != "http" && theirs.Scheme != "https") return false;
        return theirs.AbsolutePath == "/" && theirs.Query == "" && theirs.Fragment == "" && theirs.UserInfo == ""
            && theirs.GetLeftPart(UriPartial.Authority).Equals(own.GetLeftPart(UriPartial.Authority), StringComparison.OrdinalIgnoreCase);
    }

    /// <summary>The embedded host's answer: 403 problem+json, code CrossSiteRequest.</summary>
    public static async Task Refuse(HttpListenerResponse response, string detail)
    {
        byte[] body = System.Text.Encoding.UTF8.GetBytes(new Newtonsoft.Json.Linq.JObject
        {
            ["type"] = "urn:routelock:problem:CrossSiteRequest",
            ["title"] = "Cross-site requests are refused",
            ["status"] = 403,
            ["code"] = "CrossSiteRequest",
            ["detail"] = detail,
        }.ToString(Newtonsoft.Json.Formatting.None));
        response.StatusCode = 403;
        response.ContentType = "application/problem+json";
        response.AddHeader("Cache-Control", "no-store");
        response.ContentLength64 = body.Length;
        await response.OutputStream.WriteAsync(body);
    }
}
