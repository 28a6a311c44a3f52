using System.Net;
using Microsoft.Azure.WebJobs;
using Newtonsoft.Json.Linq;

namespace RouteLock.WebJobsHost;

/// <summary>
/// A route template under `api/`, matched the way the Functions host's ASP.NET routing matches the
/// templates the app declares: literal segments, `{name}`, `{name?}`, `{*rest}`, constraints ignored
/// (the app declares none). More literal segments win, so `routes/{id}/audit` beats `routes/{id}`.
/// </summary>
public sealed record RouteTemplate(string[] Segments)
{
    public static RouteTemplate Parse(string template) => new(template.Trim('/').Split('/', StringSplitOptions.RemoveEmptyEntries));

    public int Literals => Segments.Count(s => !s.StartsWith('{'));

    static string ParamName(string segment) => segment.Trim('{', '}', '*').Split(':')[0].TrimEnd('?');

    public Dictionary<string, string>? Match(string[] path)
    {
        var values = new Dictionary<string, string>();
        for (int i = 0; i < Segments.Length; i++)
        {
            string s = Segments[i];
            if (s.StartsWith("{*")) { values[ParamName(s)] = string.Join('/', path.Skip(i)); return values; }
            if (i >= path.Length) return s.EndsWith("?}") ? values : null;
            if (s.StartsWith('{')) values[ParamName(s)] = Uri.UnescapeDataString(path[i]);
            else if (!s.Equals(path[i], StringComparison.OrdinalIgnoreCase)) return null;
        }
        return path.Length == Segments.Length ? values : null;
    }
}

/// <summary>
/// The Functions host's HTTP front door for the app's HTTP functions on `127.0.0.1:PORT/api/…`. Function
/// keys are not enforced, as `func start` does not enforce them locally; `authLevel` is reported in
/// `x-routelock-auth-level` so a test can see which level Azure would ask for.
/// </summary>
public sealed class FrontDoor(
    int port,
    string secret,
    IReadOnlyList<JsFunction> functions,
    Worker worker,
    Func<string?> client,
    IAsyncConverter<HttpRequestMessage, HttpResponseMessage> durableApi)
{
    readonly HttpListener listener = new();
    readonly List<(RouteTemplate Route, JsFunction Fn)> routes = functions
        .Where(f => f.TriggerType.Equals("httpTrigger", StringComparison.OrdinalIgnoreCase))
        .Select(f => (RouteTemplate.Parse((string?)f.Trigger["route"] ?? f.Name), f))
        .OrderByDescending(r => r.Item1.Literals)
        .ToList();

    public string BaseUrl => $"http://127.0.0.1:{port}/api";

    public void Start()
    {
        listener.Prefixes.Add($"http://127.0.0.1:{port}/");
        listener.Start();
        _ = Task.Run(Loop);
    }

    public void Stop() => listener.Close();

    async Task Loop()
    {
        while (listener.IsListening)
        {
            HttpListenerContext context;
            try { context = await listener.GetContextAsync(); }
            catch (Exception) { return; }
            _ = Task.Run(() => Serve(context));
        }
    }

    (JsFunction Fn, Dictionary<string, string> Params)? Find(string method, string path)
    {
        if (!path.StartsWith("/api/", StringComparison.OrdinalIgnoreCase)) return null;
        var segments = path[5..].Split('/', StringSplitOptions.RemoveEmptyEntries);
        foreach (var (route, fn) in routes)
        {
            var methods = (fn.Trigger["methods"] as JArray)?.Select(m => ((string)m!).ToUpperInvariant()).ToList();
            if (methods is { Count: > 0 } && !methods.Contains(method)) continue;
            if (route.Match(segments) is { } values) return (fn, values);
        }
        return null;
    }

    async Task Serve(HttpListenerContext context)
    {
        var response = context.Response;
        try
        {
            var request = context.Request;
            if (request.Url!.AbsolutePath.StartsWith(DurableApiPath, StringComparison.OrdinalIgnoreCase))
            {
                if (!HoldsSecret(request)) { response.StatusCode = 401; return; }
                await ServeDurableApi(request, response);
                return;
            }
            if (CrossSite.Refusal(request) is string refusal) { await CrossSite.Refuse(response, refusal); return; }
            var found = Find(request.HttpMethod.ToUpperInvariant(), request.Url!.AbsolutePath);
            if (found is not var (fn, values)) { response.StatusCode = 404; return; }
            var data = new JObject { ["http"] = await HttpData(request, values) };
            var answer = await worker.InvokeAsync(Worker.Invocation(fn, data, client()));
            Bridge.WriteQueueOutputs(fn, answer);
            response.AddHeader("x-routelock-auth-level", (string?)fn.Trigger["authLevel"] ?? "function");
            await Write(response, answer["returnValue"]?["http"] as JObject);
        }
        catch (Exception e)
        {
            Console.Error.WriteLine($"front door: {context.Request.HttpMethod} {context.Request.Url?.AbsolutePath}: {e.Message}");
            response.StatusCode = 500;
        }
        finally
        {
            try { response.Close(); } catch (Exception) { /* the caller went away */ }
        }
    }

    const string DurableApiPath = "/runtime/webhooks/durabletask/";

    /// <summary>
    /// The Durable HTTP API reads inputs, terminates, raises events and purges: Azure asks for the
    /// extension's systemKey (`code` or `x-functions-key`); here the per-run secret stands in for it.
    /// </summary>
    bool HoldsSecret(HttpListenerRequest request)
    {
        string given = request.QueryString["code"] ?? request.Headers["x-functions-key"] ?? "";
        return System.Security.Cryptography.CryptographicOperations.FixedTimeEquals(
            System.Text.Encoding.UTF8.GetBytes(given), System.Text.Encoding.UTF8.GetBytes(secret));
    }

    /// <summary>The Durable extension's HTTP API (what the JS client calls), handed to the extension as the host does.</summary>
    async Task ServeDurableApi(HttpListenerRequest request, HttpListenerResponse response)
    {
        using var message = new HttpRequestMessage(new HttpMethod(request.HttpMethod), request.Url);
        using var body = new MemoryStream();
        await request.InputStream.CopyToAsync(body);
        message.Content = new ByteArrayContent(body.ToArray());
        foreach (string key in request.Headers.AllKeys.OfType<string>())
            if (!message.Headers.TryAddWithoutValidation(key, request.Headers[key]))
                message.Content.Headers.TryAddWithoutValidation(key, request.Headers[key]);
        using var answer = await durableApi.ConvertAsync(message, CancellationToken.None);
        response.StatusCode = (int)answer.StatusCode;
        foreach (var (key, value) in answer.Headers.Concat(answer.Content?.Headers ?? Enumerable.Empty<KeyValuePair<string, IEnumerable<string>>>()))
            if (!key.Equals("Content-Length", StringComparison.OrdinalIgnoreCase))
                foreach (var v in value) response.AppendHeader(key, v);
        if (answer.Content != null)
        {
            byte[] bytes = await answer.Content.ReadAsByteArrayAsync();
            response.ContentLength64 = bytes.Length;
            await response.OutputStream.WriteAsync(bytes);
        }
    }

    static async Task<JObject> HttpData(HttpListenerRequest request, Dictionary<string, string> values)
    {
        var headers = new JObject();
        foreach (string key in request.Headers.AllKeys.OfType<string>()) headers[key.ToLowerInvariant()] = request.Headers[key];
        var query = new JObject();
        foreach (string key in request.QueryString.AllKeys.OfType<string>()) query[key] = request.QueryString[key] ?? "";
        using var body = new MemoryStream();
        await request.InputStream.CopyToAsync(body);
        return new JObject
        {
            ["method"] = request.HttpMethod,
            ["url"] = request.Url!.ToString(),
            ["headers"] = headers,
            ["query"] = query,
            ["params"] = JObject.FromObject(values),
            ["body"] = body.Length == 0 ? null : new JObject { ["base64"] = Convert.ToBase64String(body.ToArray()) },
        };
    }

    static async Task Write(HttpListenerResponse response, JObject? http)
    {
        if (http == null) { response.StatusCode = 204; return; }
        response.StatusCode = int.TryParse((string?)http["statusCode"], out int status) ? status : 200;
        foreach (var (key, value) in http["headers"] as JObject ?? [])
        {
            if (key.Equals("content-length", StringComparison.OrdinalIgnoreCase)) continue;
            foreach (var v in value is JArray many ? many.Select(x => (string)x!) : [(string?)value ?? ""]) response.AppendHeader(key, v);
        }
        if (Worker.FromTypedData(http["body"]) is { } body)
        {
            byte[] bytes = body as byte[] ?? System.Text.Encoding.UTF8.GetBytes(body as string ?? Newtonsoft.Json.JsonConvert.SerializeObject(body));
            response.ContentLength64 = bytes.Length;
            await response.OutputStream.WriteAsync(bytes);
        }
    }
}
