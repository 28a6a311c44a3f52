using System.Diagnostics;
using System.Runtime.InteropServices;
using Azure.Storage.Queues;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;
using Microsoft.Azure.WebJobs.Extensions.Timers;
using Microsoft.Azure.WebJobs.Host;
using Microsoft.Azure.WebJobs.Host.Config;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using RouteLock.WebJobsHost;

/// <summary>
/// The WebJobs-SDK host: reads its settings (failing before anything starts), asks the Node worker for the
/// app's functions, generates one WebJobs function per JS function, starts the extensions, then the HTTP
/// front door. SIGTERM or Ctrl-C stops the front door, then the host (its queue leases released).
/// </summary>
public static class Program
{
    public static async Task<int> Main(string[] args)
    {
        var clock = Stopwatch.StartNew();
        bool checkOnly = args.Contains("--check");
        HostSettings settings;
        try { settings = HostSettings.Load(Environment.GetEnvironmentVariable, Environment.GetEnvironmentVariables().Keys.Cast<string>(), checkOnly); }
        catch (SettingsException e) { Console.Error.WriteLine($"webjobs host: {e.Code}: {e.Message}"); return 2; }
        if (checkOnly) return 0;

        var worker = new Worker(settings.WorkerUrl, settings.Secret);
        var functions = await worker.DescribeAsync();
        Bridge.Worker = worker;
        foreach (var fn in functions) Bridge.Functions[fn.Name] = fn;
        var queues = new QueueServiceClient(settings.Storage, new QueueClientOptions { MessageEncoding = QueueMessageEncoding.Base64 });
        Bridge.Queue = queues.GetQueueClient;

        // "node" selects the JSON out-of-proc protocol durable-functions speaks; CONTAINER_NAME would make
        // the extension believe it runs on Linux consumption and write its event logs to stdout.
        Environment.SetEnvironmentVariable("FUNCTIONS_WORKER_RUNTIME", "node");
        Environment.SetEnvironmentVariable("CONTAINER_NAME", null);
        using var host = Build(settings, FunctionEmitter.Emit(functions));
        try { await host.StartAsync(); }
        catch (Exception e) { Console.Error.WriteLine($"webjobs host: HOST_START_FAILED: {e.GetBaseException().Message}"); return 2; }
        await host.Services.GetRequiredService<IJobHost>().CallAsync(nameof(ClientCapture.Capture));

        var durableApi = (IAsyncConverter<HttpRequestMessage, HttpResponseMessage>)host.Services
            .GetServices<IExtensionConfigProvider>().OfType<DurableTaskExtension>().Single();
        if (Environment.GetEnvironmentVariable("ROUTELOCK_HOST_TRACE_CLIENT") == "1") Console.Error.WriteLine(ClientCapture.Json);
        var door = new FrontDoor(settings.Port, settings.Secret, functions, worker, () => ClientCapture.Json, durableApi);
        door.Start();
        foreach (var fn in functions.Where(f => !FunctionEmitter.Served(f) && f.TriggerType != "httpTrigger"))
            Console.WriteLine($"webjobs host: {fn.Name} ({fn.TriggerType}) is not served here");
        Console.WriteLine($"webjobs host: {functions.Count} functions; listening on {door.BaseUrl} after {clock.ElapsedMilliseconds} ms");

        await Stopped();
        long stopAt = clock.ElapsedMilliseconds;
        door.Stop();
        await host.StopAsync();
        Console.WriteLine($"webjobs host: stopped in {clock.ElapsedMilliseconds - stopAt} ms");
        return 0;
    }

    // held in fields: a registration that is collected unregisters its handler
    static PosixSignalRegistration? onTerm, onInt;

    static Task Stopped()
    {
        var stop = new TaskCompletionSource();
        void OnSignal(PosixSignalContext c) { c.Cancel = true; stop.TrySetResult(); }
        onTerm = PosixSignalRegistration.Create(PosixSignal.SIGTERM, OnSignal);
        onInt = PosixSignalRegistration.Create(PosixSignal.SIGINT, OnSignal);
        return stop.Task;
    }

    static IHost Build(HostSettings settings, Type generated) => new HostBuilder()
        .ConfigureAppConfiguration(c => c.AddInMemoryCollection(settings.Configuration))
        .ConfigureWebJobs(b =>
        {
            b.AddDurableTask();
            b.AddAzureStorageQueues();
            b.AddTimers();
        })
        .ConfigureLogging(l => l.AddProvider(new ConsoleLogger(Enum.Parse<LogLevel>(Environment.GetEnvironmentVariable("ROUTELOCK_HOST_LOG_LEVEL") ?? "Warning"))))
        .ConfigureServices(s =>
        {
            s.AddSingleton<ITypeLocator>(new FixedTypes([generated, typeof(ClientCapture)]));
            s.AddSingleton<ScheduleMonitor, MemoryScheduleMonitor>();
            s.AddSingleton<IWebHookProvider>(new WebHooks(settings.Port, settings.Secret));
            // Dev polling, as the embedded host's dev timing: the defaults (30 s, 1 min) make an idle
            // orchestration or queue wait that long for its next message. host.json wins when it sets them.
            s.PostConfigure<DurableTaskOptions>(o =>
            {
                if (!settings.DurablePollingSet) o.StorageProvider["maxQueuePollingInterval"] = "00:00:01";
                // The JS client then calls the extension's HTTP API through the front door's free port (as
                // the Functions host serves /runtime/webhooks/durabletask), not the extension's local RPC
                // listener, whose port 3.19.0 fixes at 17071 (a random one in 30000–31000 when taken).
                o.LocalRpcEndpointEnabled = false;
            });
            s.PostConfigure<Microsoft.Azure.WebJobs.Host.QueuesOptions>(o =>
            {
                if (!settings.QueuePollingSet) o.MaxPollingInterval = TimeSpan.FromSeconds(1);
            });
        })
        .Build();
}

/// <summary>
/// Where the Durable client's management URLs point; without one the JS client binding is refused. The
/// query carries the per-run secret as `code`, the way the Functions host embeds the extension's systemKey:
/// the extension appends this query to every URL it hands the JS client, and the front door refuses the
/// Durable HTTP API without it.
/// </summary>
sealed class WebHooks(int port, string secret) : IWebHookProvider
{
    public Uri GetUrl(IExtensionConfigProvider extension) =>
        new($"http://127.0.0.1:{port}/runtime/webhooks/durabletask?code={Uri.EscapeDataString(secret)}");
}

/// <summary>
/// Timer schedules kept in memory: the extension's own monitor keeps them in blob storage through the
/// Storage Blobs extension, which this host does not load. A schedule missed while the host was down is
/// therefore not run late on the next start, as it would be in Azure.
/// </summary>
sealed class MemoryScheduleMonitor : ScheduleMonitor
{
    readonly System.Collections.Concurrent.ConcurrentDictionary<string, ScheduleStatus> statuses = new();
    public override Task<ScheduleStatus> GetStatusAsync(string timerName) => Task.FromResult(statuses.GetValueOrDefault(timerName)!);
    public override Task UpdateStatusAsync(string timerName, ScheduleStatus status) { statuses[timerName] = status; return Task.CompletedTask; }
}

sealed class FixedTypes(IReadOnlyList<Type> types) : ITypeLocator
{
    public IReadOnlyList<Type> GetTypes() => types;
}

/// <summary>
/// Host and extension logs on stderr at ROUTELOCK_HOST_LOG_LEVEL (Warning by default). The Azure SDK's own
/// request logs stay at Error, as the Functions host filters them: the queue listeners' polling of queues
/// not created yet is a 404 warning every second otherwise.
/// </summary>
sealed class ConsoleLogger(LogLevel min) : ILoggerProvider
{
    public ILogger CreateLogger(string category) => new Category(category.StartsWith("Azure.") ? LogLevel.Error : min);
    public void Dispose() { }

    sealed class Category(LogLevel min) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;
        public bool IsEnabled(LogLevel level) => level >= min;
        public void Log<TState>(LogLevel level, EventId id, TState state, Exception? ex, Func<TState, Exception?, string> format)
        {
            if (IsEnabled(level)) Console.Error.WriteLine($"webjobs host [{level}] {format(state, ex)}{(ex != null ? ": " + ex.Message : "")}");
        }
    }
}

namespace Microsoft.Azure.WebJobs.Script.Workers.Rpc
{
    /// <summary>The Functions host's type name: the extension recognises a worker failure by it.</summary>
    public class RpcException(string message) : Exception(message);
}
