using System.Text;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace RouteLock.WebJobsHost;

/// <summary>One JS function as the worker registered it: its name, trigger binding and other bindings.</summary>
public sealed record JsFunction(string Name, JObject Trigger, JObject Bindings)
{
    public string TriggerType => (string)Trigger["type"]!;
    public string TriggerName => (string)Trigger["name"]!;

    /// <summary>The Durable client input's binding name, when the function declares one.</summary>
    public string? ClientBinding => Bindings.Properties()
        .FirstOrDefault(p => (string?)p.Value["type"] == "durableClient" && (string?)p.Value["direction"] == "in")?.Name;

    public JObject? Binding(string name) => Bindings[name] as JObject;
}

/// <summary>The failure the extension reads out-of-proc state from: the Functions host's RpcException shape.</summary>
public sealed class WorkerFailure(string message, string stack)
    : Microsoft.Azure.WebJobs.Script.Workers.Rpc.RpcException($"Result: Failure\nException: {message}\nStack: {stack}");

/// <summary>
/// The loopback link to the Node worker stand-in (hosts/webjobs/worker.js). Trigger calls are synchronous:
/// orchestrator threads must not do async I/O (the Durable extension runs them on its own scheduler).
/// </summary>
public sealed class Worker(Uri url, string secret)
{
    static readonly HttpClient Http = new() { Timeout = TimeSpan.FromMinutes(10) };

    /// <summary>The per-run secret the worker refuses every call without.</summary>
    const string KeyHeader = "x-routelock-worker-key";

    public async Task<IReadOnlyList<JsFunction>> DescribeAsync()
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, url);
        request.Headers.Add(KeyHeader, secret);
        using var response = await Http.SendAsync(request);
        response.EnsureSuccessStatusCode();
        string text = await response.Content.ReadAsStringAsync();
        return JArray.Parse(text).Cast<JObject>()
            .Select(f => new JsFunction((string)f["name"]!, (JObject)f["trigger"]!, (JObject)f["bindings"]!))
            .ToList();
    }

    HttpRequestMessage Request(JObject invocation) => new(HttpMethod.Post, url)
    {
        Content = new StringContent(invocation.ToString(Formatting.None), Encoding.UTF8, "application/json"),
        Headers = { { KeyHeader, secret } },
    };

    public JObject Invoke(JObject invocation)
    {
        using var response = Http.Send(Request(invocation));
        using var reader = new StreamReader(response.Content.ReadAsStream());
        return Checked(JObject.Parse(reader.ReadToEnd()));
    }

    public async Task<JObject> InvokeAsync(JObject invocation)
    {
        using var response = await Http.SendAsync(Request(invocation));
        return Checked(JObject.Parse(await response.Content.ReadAsStringAsync()));
    }

    static JObject Checked(JObject answer) =>
        (bool)answer["ok"]! ? answer : throw new WorkerFailure((string?)answer["message"] ?? "", (string?)answer["stack"] ?? "");

    public static JObject Invocation(JsFunction fn, JToken triggerData, string? client, JObject? triggerMetadata = null)
    {
        var inputs = new JArray(new JObject { ["name"] = fn.TriggerName, ["data"] = triggerData });
        if (client != null && fn.ClientBinding is string clientName)
            inputs.Add(new JObject { ["name"] = clientName, ["data"] = new JObject { ["string"] = client } });
        return new JObject { ["name"] = fn.Name, ["inputs"] = inputs, ["triggerMetadata"] = triggerMetadata ?? new JObject() };
    }

    /// <summary>A returned TypedData as the Functions host hands it to an extension.</summary>
    public static object? FromTypedData(JToken? data)
    {
        if (data is not JObject o) return null;
        if (o["string"] != null) return (string?)o["string"];
        if (o["json"] != null) return JsonConvert.DeserializeObject((string)o["json"]!);
        if (o["int"] != null) return (long)o["int"]!;
        if (o["double"] != null) return (double)o["double"]!;
        if (o["base64"] != null) return Convert.FromBase64String((string)o["base64"]!);
        return null;
    }
}
