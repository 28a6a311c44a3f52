/** The routing library: everything that decides. Imports no Azure Functions API (DESIGN §1). */
export * from './clock';
export * from './config';
export * from './errors';
export * from './lock/document';
export * from './lock/rules';
export * from './lock/state';
export * from './lock/token';
export * from './lock/view';
export * from './router';
export * from './regions';
export * from './store/port';
export * from './store/sqlite';
export * from './store/cosmos';
export * from './store/open';
export * from './client';
