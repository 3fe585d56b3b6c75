// Fixture files imported as text (Vite's `?raw`): the Workers runtime has no file system to read them from.
declare module "*.eml?raw" {
  const content: string;
  export default content;
}

declare module "*.pem?raw" {
  const content: string;
  export default content;
}
